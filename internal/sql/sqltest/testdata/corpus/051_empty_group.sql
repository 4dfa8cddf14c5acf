-- exercises: aggregate without GROUP BY over no rows: one row of NULLs and 0
-- tables: orders
-- expect: rows
SELECT count(*) AS n, sum(qty) AS qty, max(price) AS top FROM orders WHERE qty > 100
