-- exercises: projection of stored columns
-- tables: orders
-- expect: rows
SELECT id, customer_id, product_id, qty, price FROM orders
