-- exercises: n-way join: orders, customers, products
-- tables: orders, customers, products
-- expect: rows
SELECT o.id, c.name AS customer, p.name AS product, p.category, o.qty * o.price AS amount
FROM orders o JOIN customers c ON o.customer_id = c.id JOIN products p ON o.product_id = p.id
