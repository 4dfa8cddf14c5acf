-- exercises: arithmetic on int4 and numeric, unary minus
-- tables: orders
-- expect: rows
SELECT id, qty * price AS amount, price - 1 AS less, -qty AS neg, qty + 1 AS next_qty, qty * 2 - 1 AS odd FROM orders
