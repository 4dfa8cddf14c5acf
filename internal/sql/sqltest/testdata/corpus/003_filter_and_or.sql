-- exercises: WHERE with AND, OR and comparisons
-- tables: orders
-- expect: rows
SELECT id, status, qty, price FROM orders WHERE status = 'paid' AND (qty > 2 OR price < 10)
