-- exercises: string_agg with a computed value, ORDER BY DESC inside, beside count
-- tables: orders
-- expect: rows
SELECT status, string_agg(CAST(id AS text), '|' ORDER BY price DESC, id) AS ids, count(*) AS n
FROM orders GROUP BY status
