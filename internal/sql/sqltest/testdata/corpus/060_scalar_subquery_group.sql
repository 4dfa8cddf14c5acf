-- exercises: a scalar subquery beside GROUP BY, in the select list and HAVING
-- tables: orders, customers
-- expect: rows
SELECT status, count(*) AS n, (SELECT count(*) FROM customers) AS customers
FROM orders
GROUP BY status
HAVING count(*) > (SELECT count(*) FROM customers) / 10
