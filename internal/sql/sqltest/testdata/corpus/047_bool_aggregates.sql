-- exercises: bool_and, bool_or over a predicate
-- tables: orders
-- expect: rows
SELECT status, bool_and(qty > 1) AS all_many, bool_or(discount IS NULL) AS any_undiscounted FROM orders GROUP BY status
