-- Nexmark q5, streaming: hot items per 10 s window sliding every 2 s.
SELECT AB.auction, AB.num, AB.starttime
FROM (
    SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
    FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
    GROUP BY auction, window_start, window_end
) AB
JOIN (
    SELECT max(num) AS maxn, starttime, endtime
    FROM (
        SELECT count(*) AS num, window_start AS starttime, window_end AS endtime
        FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
        GROUP BY auction, window_start, window_end
    ) CB
    GROUP BY starttime, endtime
) MB ON AB.starttime = MB.starttime AND AB.endtime = MB.endtime AND AB.num >= MB.maxn
