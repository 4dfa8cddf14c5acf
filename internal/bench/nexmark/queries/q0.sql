-- exercises: pass-through projection of every bid (Nexmark q0)
-- tables: bid
-- expect: rows
SELECT auction, bidder, price, date_time, extra
FROM bid
