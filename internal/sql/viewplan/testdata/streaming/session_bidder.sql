-- exercises: SESSION windows per bidder and auction (two key columns, 2 s gap) with count and max per session; a tenth of the bids deleted, splitting sessions
-- tables: bid
SELECT bidder, auction, window_start, window_end, count(*) AS bids, max(price) AS top
FROM SESSION(bid, date_time, INTERVAL '2' SECOND, bidder, auction)
GROUP BY bidder, auction, window_start, window_end
-- batch:
WITH g AS (
    SELECT bidder, auction, date_time, price,
           CASE WHEN date_time - lag(date_time) OVER (PARTITION BY bidder, auction ORDER BY date_time) < INTERVAL '2 second' THEN 0 ELSE 1 END AS brk
    FROM bid
), s AS (
    SELECT bidder, auction, date_time, price, sum(brk) OVER (PARTITION BY bidder, auction ORDER BY date_time ROWS UNBOUNDED PRECEDING) AS sid FROM g
)
SELECT bidder, auction, min(date_time) AS window_start, max(date_time) + INTERVAL '2 second' AS window_end, count(*) AS bids, max(price) AS top
FROM s GROUP BY bidder, auction, sid
