-- exercises: min over a ROWS frame without PARTITION BY (ROWS n PRECEDING), over a filtered input
-- tables: orders
-- expect: rows
SELECT id, price, min(price) OVER (ORDER BY ts DESC, id ROWS 4 PRECEDING) AS cheapest_of_5
FROM orders WHERE status <> 'cancelled'
