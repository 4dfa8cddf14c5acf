-- exercises: hopping window (10 s, sliding 2 s) as GROUP BY of a computed start, MAX per window, join on window (Nexmark q5: hot items)
-- tables: bid
-- expect: rows
-- The reference returns auction and num; starttime is added so results
-- compare per window.
WITH hop AS (
    SELECT B.auction,
           TIMESTAMP '1970-01-01' + INTERVAL '1 second' *
               (CAST(floor(extract(epoch FROM B.date_time) / 2) AS bigint) * 2 - 2 * K.n) AS starttime
    FROM bid B CROSS JOIN generate_series(0, 4) AS K(n)
),
auction_bids AS (
    SELECT auction, count(*) AS num, starttime, starttime + INTERVAL '10 seconds' AS endtime
    FROM hop
    GROUP BY auction, starttime
),
max_bids AS (
    SELECT max(num) AS maxn, starttime, endtime
    FROM auction_bids
    GROUP BY starttime, endtime
)
SELECT AB.auction, AB.num, AB.starttime
FROM auction_bids AB
JOIN max_bids MB
  ON AB.starttime = MB.starttime AND AB.endtime = MB.endtime AND AB.num >= MB.maxn
