-- exercises: aggregate over an aggregate (a view over a view), as nested subqueries
-- tables: orders
-- expect: rows
SELECT n, count(*) AS customers FROM (
    SELECT customer_id, count(*) AS n FROM orders GROUP BY customer_id
) per_customer GROUP BY n
