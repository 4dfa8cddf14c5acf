-- exercises: top-N over an aggregate: the three customers spending most per status
-- tables: orders
-- expect: rows
SELECT status, customer_id, total
FROM (SELECT status, customer_id, sum(price) AS total,
             ROW_NUMBER() OVER (PARTITION BY status ORDER BY sum(price) DESC, customer_id) AS rn
      FROM orders WHERE customer_id IS NOT NULL GROUP BY status, customer_id) t
WHERE rn <= 3
