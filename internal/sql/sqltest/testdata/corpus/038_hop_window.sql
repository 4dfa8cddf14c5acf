-- exercises: 30-minute windows sliding every 10 minutes (generate_series puts a row in each window)
-- tables: orders
-- expect: rows
SELECT window_start, count(*) AS n, max(price) AS top FROM (
    SELECT o.price, TIMESTAMP '1970-01-01' + INTERVAL '1 second' *
        (CAST(floor(extract(epoch FROM o.ts) / 600) AS bigint) * 600 - 600 * k.n) AS window_start
    FROM orders o CROSS JOIN generate_series(0, 2) AS k(n)
) w GROUP BY window_start
