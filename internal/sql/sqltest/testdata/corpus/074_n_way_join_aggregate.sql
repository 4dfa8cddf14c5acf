-- exercises: four-way join (inner, inner, left on a computed key) under GROUP BY
-- tables: orders, products, customers
-- expect: rows
SELECT p.category, c.city, count(*) AS n, sum(o.qty) AS qty, count(o2.id) AS followed
FROM orders o
JOIN products p ON p.id = o.product_id
JOIN customers c ON c.id = o.customer_id
LEFT JOIN orders o2 ON o2.id = o.id + 1
GROUP BY p.category, c.city
