-- exercises: join with an interval predicate, MAX per auction, AVG over it per category (Nexmark q4: average winning price per category)
-- tables: auction, bid
-- expect: rows
SELECT Q.category, AVG(Q.final) AS avg_final
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category
