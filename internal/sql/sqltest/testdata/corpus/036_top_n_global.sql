-- exercises: global ORDER BY with LIMIT and OFFSET (ordered)
-- tables: orders
-- expect: rows
-- order: ordered
SELECT id, price FROM orders ORDER BY price DESC, id LIMIT 5 OFFSET 1
