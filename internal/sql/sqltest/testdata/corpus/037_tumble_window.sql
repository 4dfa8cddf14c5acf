-- exercises: 10-minute tumbling windows as GROUP BY of a computed start
-- tables: orders
-- expect: rows
SELECT TIMESTAMP '1970-01-01' + INTERVAL '1 second' * (CAST(floor(extract(epoch FROM ts) / 600) AS bigint) * 600) AS window_start, count(*) AS n, sum(qty) AS qty
FROM orders GROUP BY 1
