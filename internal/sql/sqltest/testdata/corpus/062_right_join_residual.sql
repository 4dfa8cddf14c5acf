-- exercises: RIGHT JOIN with an equality and a residual comparing the sides' prices
-- tables: orders, products
-- expect: rows
SELECT p.id, p.category, o.id AS order_id
FROM orders o RIGHT JOIN products p ON p.id = o.product_id AND o.price > p.list_price / 4
