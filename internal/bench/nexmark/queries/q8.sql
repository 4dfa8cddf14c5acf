-- exercises: two tumbling-window (10 s) GROUP BYs joined on key and window (Nexmark q8: new users who created auctions)
-- tables: person, auction
-- expect: rows
SELECT P.id, P.name, P.starttime
FROM (
    SELECT id, name, starttime, starttime + INTERVAL '10 seconds' AS endtime
    FROM (
        SELECT id, name,
               TIMESTAMP '1970-01-01' + INTERVAL '1 second' *
                   (CAST(floor(extract(epoch FROM date_time) / 10) AS bigint) * 10) AS starttime
        FROM person
    ) W
    GROUP BY id, name, starttime
) P
JOIN (
    SELECT seller, starttime, starttime + INTERVAL '10 seconds' AS endtime
    FROM (
        SELECT seller,
               TIMESTAMP '1970-01-01' + INTERVAL '1 second' *
                   (CAST(floor(extract(epoch FROM date_time) / 10) AS bigint) * 10) AS starttime
        FROM auction
    ) W
    GROUP BY seller, starttime
) A ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime
