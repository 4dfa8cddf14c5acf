-- exercises: stream-stream interval join: auctions a person opened within 10 s of joining
-- tables: person, auction
-- expect: rows
SELECT P.id, P.name, A.id AS auction, A.date_time
FROM person P JOIN auction A ON A.seller = P.id AND A.date_time BETWEEN P.date_time AND P.date_time + INTERVAL '10 seconds'
