-- exercises: NOT EXISTS: customers with no orders
-- tables: customers, orders
-- expect: rows
SELECT c.id, c.name FROM customers c WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id)
