-- exercises: SELECT DISTINCT over two columns
-- tables: orders
-- expect: rows
SELECT DISTINCT status, qty FROM orders
