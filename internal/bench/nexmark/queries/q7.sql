-- exercises: tumbling window (10 s) MAX joined back to the stream on price and a time range (Nexmark q7: highest bid per window)
-- tables: bid
-- expect: rows
SELECT B.auction, B.price, B.bidder, B.date_time, B.extra
FROM bid B
JOIN (
    SELECT MAX(price) AS maxprice, window_start + INTERVAL '10 seconds' AS date_time
    FROM (
        SELECT price,
               TIMESTAMP '1970-01-01' + INTERVAL '1 second' *
                   (CAST(floor(extract(epoch FROM date_time) / 10) AS bigint) * 10) AS window_start
        FROM bid
    ) W
    GROUP BY window_start
) B1 ON B.price = B1.maxprice
WHERE B.date_time BETWEEN B1.date_time - INTERVAL '10 seconds' AND B1.date_time
