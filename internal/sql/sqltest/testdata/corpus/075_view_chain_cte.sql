-- exercises: views over views as a WITH chain: an aggregate joined to a table, aggregated again, filtered
-- tables: orders, customers
-- expect: rows
WITH per_customer AS (
    SELECT customer_id, count(*) AS n, sum(qty) AS qty FROM orders GROUP BY customer_id
), per_tier AS (
    SELECT c.tier, sum(p.n) AS orders, max(p.qty) AS top
    FROM per_customer p JOIN customers c ON c.id = p.customer_id GROUP BY c.tier
)
SELECT tier, orders, top FROM per_tier WHERE orders > 5
