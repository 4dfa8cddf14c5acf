-- exercises: UNION ALL of two projections (duplicates kept)
-- tables: orders, customers
-- expect: rows
SELECT customer_id AS id, 'order' AS kind FROM orders WHERE qty = 1
UNION ALL
SELECT id, 'customer' AS kind FROM customers WHERE tier = 1
