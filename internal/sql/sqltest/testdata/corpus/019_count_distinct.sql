-- exercises: COUNT(DISTINCT) per group and overall
-- tables: orders
-- expect: rows
SELECT customer_id, count(DISTINCT product_id) AS products, count(DISTINCT status) AS statuses, count(*) AS n
FROM orders GROUP BY customer_id
