-- exercises: CASE, COALESCE, NULLIF
-- tables: orders
-- expect: rows
SELECT id,
       CASE WHEN qty >= 4 THEN 'bulk' WHEN qty >= 2 THEN 'few' ELSE 'one' END AS size,
       COALESCE(discount, 0) AS discount,
       NULLIF(status, 'new') AS status
FROM orders
