-- exercises: SELECT DISTINCT keeps one NULL
-- tables: customers
-- expect: rows
SELECT DISTINCT city FROM customers
