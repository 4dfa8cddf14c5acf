-- exercises: GROUP BY two keys
-- tables: orders
-- expect: rows
SELECT status, product_id, count(*) AS n, sum(qty) AS qty FROM orders GROUP BY status, product_id
