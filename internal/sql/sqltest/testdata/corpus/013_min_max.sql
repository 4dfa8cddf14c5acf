-- exercises: MIN and MAX of numeric, text, timestamp and float8 with NULLs
-- tables: orders
-- expect: rows
SELECT min(price) AS min_price, max(price) AS max_price, min(status) AS min_status, max(status) AS max_status,
       min(ts) AS first, max(ts) AS last, min(discount) AS min_d, max(discount) AS max_d FROM orders
