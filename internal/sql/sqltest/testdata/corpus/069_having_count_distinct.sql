-- exercises: HAVING on COUNT(DISTINCT) beside count(*)
-- tables: orders
-- expect: rows
SELECT product_id, count(DISTINCT customer_id) AS buyers, count(*) AS n
FROM orders GROUP BY product_id HAVING count(DISTINCT customer_id) >= 3
