-- exercises: SUM and AVG of int4, numeric and float8
-- tables: orders
-- expect: rows
SELECT sum(qty) AS qty, sum(price) AS revenue, avg(qty) AS avg_qty, avg(price) AS avg_price, sum(discount) AS d, avg(discount) AS avg_d FROM orders
