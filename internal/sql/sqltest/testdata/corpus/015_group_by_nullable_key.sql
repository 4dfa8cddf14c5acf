-- exercises: GROUP BY a nullable key: NULL is one group
-- tables: orders
-- expect: rows
SELECT customer_id, count(*) AS n, sum(price) AS spent FROM orders GROUP BY customer_id
