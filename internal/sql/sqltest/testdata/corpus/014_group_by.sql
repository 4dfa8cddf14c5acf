-- exercises: GROUP BY one text key with every aggregate
-- tables: orders
-- expect: rows
SELECT status, count(*) AS n, sum(qty) AS qty, min(price) AS min_price, max(price) AS max_price, avg(qty) AS avg_qty
FROM orders GROUP BY status
