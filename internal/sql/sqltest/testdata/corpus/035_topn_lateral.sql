-- exercises: top-N per group with LATERAL and ORDER BY ... LIMIT
-- tables: products, orders
-- expect: rows
SELECT p.id AS product, t.id AS order_id, t.price
FROM products p, LATERAL (
    SELECT o.id, o.price FROM orders o WHERE o.product_id = p.id ORDER BY o.price DESC, o.id LIMIT 2
) t
