-- exercises: COUNT(*) and COUNT(col) skipping NULLs, over the whole table
-- tables: orders
-- expect: rows
SELECT count(*) AS n, count(discount) AS with_discount, count(customer_id) AS with_customer FROM orders
