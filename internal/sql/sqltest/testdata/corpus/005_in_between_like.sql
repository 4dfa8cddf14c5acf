-- exercises: IN lists, BETWEEN, LIKE
-- tables: customers, orders
-- expect: rows
SELECT o.id, o.status, o.qty FROM orders o WHERE o.status IN ('new', 'paid') AND o.qty BETWEEN 2 AND 4 AND o.product_id NOT IN (1, 2)
UNION ALL
SELECT c.id, c.name, c.tier FROM customers c WHERE c.name LIKE 'A%' OR c.name LIKE '%9'
