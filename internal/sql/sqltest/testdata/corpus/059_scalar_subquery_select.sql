-- exercises: uncorrelated scalar subqueries in the select list and WHERE (one empty on purpose: NULL)
-- tables: orders
-- expect: rows
SELECT id, qty, qty - (SELECT max(qty) FROM orders WHERE status = 'new') AS below_max,
       (SELECT min(id) FROM orders WHERE qty > 100) AS none
FROM orders
WHERE status = 'paid' AND price > (SELECT avg(price) FROM orders) / 2
