-- exercises: LEFT JOIN with an equality and a residual over both sides (NULL-extended when no row passes; a NULL tier passes none)
-- tables: customers, orders
-- expect: rows
SELECT c.id, c.tier, o.id AS order_id, o.qty
FROM customers c LEFT JOIN orders o ON o.customer_id = c.id AND o.qty > c.tier
