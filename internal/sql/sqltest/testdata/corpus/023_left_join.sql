-- exercises: LEFT JOIN: customers without orders keep NULLs
-- tables: customers, orders
-- expect: rows
SELECT c.id AS customer, c.name, o.id AS order_id, o.price FROM customers c LEFT JOIN orders o ON o.customer_id = c.id
