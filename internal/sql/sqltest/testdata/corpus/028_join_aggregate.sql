-- exercises: join then GROUP BY a column of the other side
-- tables: orders, products
-- expect: rows
SELECT p.category, count(*) AS n, sum(o.qty * o.price) AS revenue, max(o.price) AS top FROM orders o JOIN products p ON p.id = o.product_id GROUP BY p.category
