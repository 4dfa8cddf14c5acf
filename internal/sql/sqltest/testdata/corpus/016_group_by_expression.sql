-- exercises: GROUP BY expressions (mod, CASE)
-- tables: orders
-- expect: rows
SELECT mod(qty, 2) AS parity, CASE WHEN price >= 25 THEN 'high' ELSE 'low' END AS band, count(*) AS n
FROM orders GROUP BY mod(qty, 2), CASE WHEN price >= 25 THEN 'high' ELSE 'low' END
