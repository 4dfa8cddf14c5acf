-- exercises: join with an equality and a non-equality condition
-- tables: orders, products
-- expect: rows
SELECT o.id, p.id AS product, o.price, p.list_price FROM orders o JOIN products p ON p.id = o.product_id AND o.price < p.list_price / 2
