-- exercises: inner equi-join, filter on both sides
-- tables: orders, customers
-- expect: rows
SELECT o.id, c.name, c.city, o.price FROM orders o JOIN customers c ON o.customer_id = c.id WHERE c.tier IS NOT NULL AND o.qty > 1
