-- exercises: INTERSECT (distinct) of two filtered projections, a NULL key among them
-- tables: orders
-- expect: rows
SELECT customer_id, status FROM orders WHERE qty >= 3
INTERSECT
SELECT customer_id, status FROM orders WHERE discount < 0.15
