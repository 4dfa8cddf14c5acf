-- exercises: FULL OUTER JOIN: both sides' unmatched rows
-- tables: customers, orders
-- expect: rows
SELECT c.id AS customer, o.id AS order_id, o.customer_id FROM customers c FULL OUTER JOIN orders o ON o.customer_id = c.id
