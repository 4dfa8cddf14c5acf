-- exercises: WITH: two aggregates joined
-- tables: orders, customers
-- expect: rows
WITH spent AS (SELECT customer_id, sum(price * qty) AS total FROM orders GROUP BY customer_id),
     cities AS (SELECT city, count(*) AS people FROM customers GROUP BY city)
SELECT c.city, cities.people, sum(s.total) AS total
FROM spent s JOIN customers c ON c.id = s.customer_id JOIN cities ON cities.city = c.city
GROUP BY c.city, cities.people
