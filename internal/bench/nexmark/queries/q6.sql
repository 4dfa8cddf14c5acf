-- exercises: top-1 per group with ROW_NUMBER, then AVG over a ROWS frame per seller (Nexmark q6: average selling price by seller, last 10 auctions)
-- tables: auction, bid
-- expect: rows
-- The winning bid is the highest price, the earliest of equal prices:
-- a total order, so the result is deterministic (the reference's
-- ORDER BY price alone is not).
SELECT Q.seller,
       AVG(Q.price) OVER (PARTITION BY Q.seller ORDER BY Q.date_time
                          ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS avg_price
FROM (
    SELECT A.id, A.seller, B.price, B.date_time,
           ROW_NUMBER() OVER (PARTITION BY A.id, A.seller ORDER BY B.price DESC, B.date_time) AS rownum
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
) Q
WHERE Q.rownum <= 1
