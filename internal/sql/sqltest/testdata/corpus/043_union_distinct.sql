-- exercises: UNION (distinct) and EXCEPT
-- tables: orders, customers
-- expect: rows
(SELECT customer_id AS id FROM orders UNION SELECT id FROM customers)
EXCEPT
SELECT id FROM customers WHERE city IS NULL
