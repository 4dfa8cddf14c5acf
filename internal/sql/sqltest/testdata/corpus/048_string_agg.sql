-- exercises: string_agg with ORDER BY inside the aggregate
-- tables: customers
-- expect: rows
SELECT tier, string_agg(name, ',' ORDER BY name) AS names FROM customers GROUP BY tier
