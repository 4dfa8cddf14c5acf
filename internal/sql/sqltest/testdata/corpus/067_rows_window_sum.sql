-- exercises: sum over a ROWS frame per partition (the last three orders of each customer, NULL customers one partition)
-- tables: orders
-- expect: rows
SELECT id, customer_id, sum(qty) OVER (PARTITION BY customer_id ORDER BY ts, id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS last3
FROM orders
