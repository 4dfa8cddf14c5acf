-- exercises: COALESCE and NULLIF as GROUP BY keys (by ordinal)
-- tables: customers
-- expect: rows
SELECT coalesce(city, 'unknown') AS city, nullif(tier, 2) AS tier, count(*) AS n
FROM customers GROUP BY 1, 2
