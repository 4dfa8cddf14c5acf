-- exercises: IN (subquery): customers with a paid order
-- tables: customers, orders
-- expect: rows
SELECT c.id, c.name FROM customers c WHERE c.id IN (SELECT o.customer_id FROM orders o WHERE o.status = 'paid')
