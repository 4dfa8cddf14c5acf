-- exercises: HAVING on an aggregate
-- tables: orders
-- expect: rows
SELECT customer_id, count(*) AS n, max(price) AS top FROM orders GROUP BY customer_id HAVING count(*) >= 3 AND max(price) > 10
