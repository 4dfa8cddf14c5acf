-- exercises: selection with mod() (Nexmark q2: bids of every 123rd auction)
-- tables: bid
-- expect: rows
SELECT auction, price
FROM bid
WHERE mod(auction, 123) = 0
