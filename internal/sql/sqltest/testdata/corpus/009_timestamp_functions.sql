-- exercises: date_trunc, extract, timestamp plus interval, timestamp comparison
-- tables: orders
-- expect: rows
SELECT id, date_trunc('hour', ts) AS hour, extract(minute FROM ts) AS minute, ts + INTERVAL '1 day' AS tomorrow
FROM orders WHERE ts < TIMESTAMP '2024-03-01 10:00:00'
