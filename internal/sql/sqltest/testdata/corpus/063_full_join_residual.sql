-- exercises: FULL JOIN with an equality and a residual on one side: both sides' unmatched rows padded
-- tables: customers, orders
-- expect: rows
SELECT c.id AS customer, o.id AS order_id, o.status
FROM customers c FULL JOIN orders o ON o.customer_id = c.id AND o.status = 'paid'
