-- exercises: RIGHT JOIN: orders naming missing products or customers
-- tables: customers, orders
-- expect: rows
SELECT c.name, o.id AS order_id, o.customer_id FROM customers c RIGHT JOIN orders o ON o.customer_id = c.id
