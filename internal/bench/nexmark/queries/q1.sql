-- exercises: currency conversion, exact numeric times bigint (Nexmark q1)
-- tables: bid
-- expect: rows
SELECT auction, bidder, 0.908 * price AS price, date_time, extra
FROM bid
