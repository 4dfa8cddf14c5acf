-- exercises: SESSION windows per customer (10 min gap, NULL customers one partition) under updates that move orders in time and between customers
-- tables: orders
SELECT customer_id, window_start, window_end, count(*) AS n, sum(qty) AS qty
FROM SESSION(orders, ts, INTERVAL '10 minutes', customer_id)
GROUP BY customer_id, window_start, window_end
-- batch:
WITH g AS (
    SELECT customer_id, ts, qty,
           CASE WHEN ts - lag(ts) OVER (PARTITION BY customer_id ORDER BY ts) < INTERVAL '10 minutes' THEN 0 ELSE 1 END AS brk
    FROM orders
), s AS (
    SELECT customer_id, ts, qty, sum(brk) OVER (PARTITION BY customer_id ORDER BY ts ROWS UNBOUNDED PRECEDING) AS sid FROM g
)
SELECT customer_id, min(ts) AS window_start, max(ts) + INTERVAL '10 minutes' AS window_end, count(*) AS n, sum(qty) AS qty
FROM s GROUP BY customer_id, sid
