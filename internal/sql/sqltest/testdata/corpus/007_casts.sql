-- exercises: casts between numeric, float8, int and text
-- tables: orders
-- expect: rows
SELECT id, CAST(price AS float8) AS price_f, CAST(qty AS text) AS qty_t, CAST(qty AS int8) AS qty_8,
       CAST(price AS int8) AS price_rounded, CAST(id AS numeric) * 1.5 AS id_n FROM orders
