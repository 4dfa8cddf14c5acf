-- exercises: MIN/MAX per group, the aggregates a delete must recompute
-- tables: orders
-- expect: rows
SELECT product_id, min(price) AS cheapest, max(price) AS dearest, min(ts) AS first, max(ts) AS last FROM orders GROUP BY product_id
