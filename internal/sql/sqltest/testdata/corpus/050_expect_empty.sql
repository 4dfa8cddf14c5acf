-- exercises: a filter nothing passes: an empty view stays empty
-- tables: orders
-- expect: empty
SELECT id, qty FROM orders WHERE qty > 100
