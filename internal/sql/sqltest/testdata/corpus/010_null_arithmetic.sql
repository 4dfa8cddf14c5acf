-- exercises: NULL through arithmetic and comparison (three-valued logic)
-- tables: orders
-- expect: rows
SELECT id, discount * 2 AS twice, discount + qty AS plus, discount > 0.1 AS big, NOT (discount > 0.1) AS small FROM orders
