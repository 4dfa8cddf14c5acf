-- exercises: uncorrelated scalar subquery in WHERE
-- tables: orders
-- expect: rows
SELECT id, price FROM orders WHERE price > (SELECT avg(price) FROM orders)
