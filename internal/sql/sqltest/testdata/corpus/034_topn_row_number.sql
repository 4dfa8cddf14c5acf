-- exercises: top-N per group with ROW_NUMBER (ties broken by id)
-- tables: orders
-- expect: rows
SELECT customer_id, id, price, rn FROM (
    SELECT customer_id, id, price, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY price DESC, id) AS rn
    FROM orders
) t WHERE rn <= 2
