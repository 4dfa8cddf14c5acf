-- exercises: SESSION windows without a key (one sequence of sessions, 40 s gap) and a view row per session
-- tables: orders
SELECT window_start, window_end, count(*) AS n, min(price) AS cheapest
FROM SESSION(orders, ts, INTERVAL '40' SECOND)
GROUP BY window_start, window_end
-- batch:
WITH g AS (
    SELECT ts, price, CASE WHEN ts - lag(ts) OVER (ORDER BY ts) < INTERVAL '40 second' THEN 0 ELSE 1 END AS brk
    FROM orders
), s AS (
    SELECT ts, price, sum(brk) OVER (ORDER BY ts ROWS UNBOUNDED PRECEDING) AS sid FROM g
)
SELECT min(ts) AS window_start, max(ts) + INTERVAL '40 second' AS window_end, count(*) AS n, min(price) AS cheapest
FROM s GROUP BY sid
