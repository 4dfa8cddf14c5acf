-- exercises: interval join of bids to their auction's first 2 s, then GROUP BY with count and max
-- tables: auction, bid
-- expect: rows
SELECT A.id, count(*) AS early_bids, max(B.price) AS top
FROM auction A JOIN bid B ON B.auction = A.id AND B.date_time BETWEEN A.date_time AND A.date_time + INTERVAL '2 seconds'
GROUP BY A.id
