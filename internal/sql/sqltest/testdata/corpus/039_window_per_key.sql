-- exercises: tumbling windows per key, with HAVING
-- tables: orders
-- expect: rows
SELECT customer_id, date_trunc('hour', ts) AS window_start, count(*) AS n, sum(price) AS spent
FROM orders WHERE customer_id IS NOT NULL GROUP BY customer_id, date_trunc('hour', ts) HAVING count(*) > 1
