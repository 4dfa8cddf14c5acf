-- exercises: stream-table style join: bids with their auction and seller, per state
-- tables: bid, auction, person
-- expect: rows
SELECT P.state, count(*) AS bids, sum(B.price) AS total FROM bid B JOIN auction A ON A.id = B.auction JOIN person P ON P.id = A.seller GROUP BY P.state
