-- exercises: lower, upper, length, substring, ||, concat, replace, NULL propagation
-- tables: customers
-- expect: rows
SELECT id, lower(name) AS lo, upper(name) AS up, length(name) AS len, substring(name FROM 1 FOR 3) AS pre,
       name || '/' || city AS joined, concat(name, '/', city) AS concat_skips_null, replace(name, ' ', '_') AS under
FROM customers
