-- exercises: LEFT interval join: each auction with its bids of the first second, or NULLs
-- tables: auction, bid
-- expect: rows
SELECT A.id, A.seller, B.bidder, B.price
FROM auction A LEFT JOIN bid B ON B.auction = A.id AND B.date_time < A.date_time + INTERVAL '1 second'
