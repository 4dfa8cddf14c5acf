-- exercises: INTERSECT ALL: a row as many times as the fewer side holds it
-- tables: orders
-- expect: rows
SELECT product_id, qty FROM orders WHERE status IN ('new', 'paid')
INTERSECT ALL
SELECT product_id, qty FROM orders WHERE status IN ('paid', 'shipped')
