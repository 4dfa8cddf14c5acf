-- exercises: CASE, casts between numbers and text, round of a numeric product, in a view's select list
-- tables: orders
-- expect: rows
SELECT id,
       CASE WHEN qty >= 4 THEN 'bulk' WHEN qty >= 2 THEN 'some' ELSE 'one' END AS size,
       CAST(qty AS text) || 'x' AS label,
       CAST(CAST(qty AS numeric) / 4 AS numeric(6,2)) AS quarter,
       round(price * qty, 1) AS total
FROM orders
