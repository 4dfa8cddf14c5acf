-- exercises: LEFT JOIN LATERAL ... ON true with ORDER BY ... LIMIT ... OFFSET: each customer's second and third largest orders, or NULLs
-- tables: customers, orders
-- expect: rows
SELECT c.id, t.id AS order_id, t.qty
FROM customers c LEFT JOIN LATERAL (
    SELECT o.id, o.qty FROM orders o
    WHERE o.customer_id = c.id AND o.status <> 'cancelled'
    ORDER BY o.qty DESC, o.id LIMIT 2 OFFSET 1
) t ON true
