-- exercises: n-way join mixing inner and left joins, and a self join
-- tables: orders, customers, products
-- expect: rows
SELECT o.id, c.city, p.category, o2.id AS same_day_order
FROM orders o
JOIN products p ON p.id = o.product_id
LEFT JOIN customers c ON c.id = o.customer_id
LEFT JOIN orders o2 ON o2.customer_id = o.customer_id AND o2.product_id = o.product_id AND o2.id > o.id
