-- exercises: LEFT JOIN then COUNT(col): zero for the unmatched
-- tables: customers, orders
-- expect: rows
SELECT c.id, count(o.id) AS orders, coalesce(sum(o.qty), 0) AS qty FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.id
