-- exercises: top-N variant: ranks 2 to 3 per partition, descending
-- tables: orders
-- expect: rows
SELECT product_id, id, price
FROM (SELECT product_id, id, price, ROW_NUMBER() OVER (PARTITION BY product_id ORDER BY price DESC, id) AS rn FROM orders) t
WHERE rn BETWEEN 2 AND 3
