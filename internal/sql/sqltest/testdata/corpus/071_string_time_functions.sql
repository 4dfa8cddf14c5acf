-- exercises: string and time functions over a filtered stream (upper, length, substring, date_trunc, extract)
-- tables: orders
-- expect: rows
SELECT id, upper(status) AS s, length(status) AS len, substring(status FROM 1 FOR 3) AS pre,
       date_trunc('hour', ts) AS hour, extract(minute FROM ts) AS minute
FROM orders WHERE status LIKE '%a%'
