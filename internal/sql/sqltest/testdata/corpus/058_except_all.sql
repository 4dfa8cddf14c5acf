-- exercises: EXCEPT ALL: the left side's copies less the right side's
-- tables: orders, customers
-- expect: rows
SELECT customer_id AS id FROM orders
EXCEPT ALL
SELECT id FROM customers WHERE tier IS NOT NULL
