-- exercises: IS NULL / IS NOT NULL on nullable columns
-- tables: orders
-- expect: rows
SELECT id, customer_id, discount FROM orders WHERE discount IS NULL OR customer_id IS NULL
