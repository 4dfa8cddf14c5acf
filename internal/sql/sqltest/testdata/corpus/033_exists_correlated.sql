-- exercises: correlated EXISTS with an aggregate-free predicate
-- tables: products, orders
-- expect: rows
SELECT p.id, p.name FROM products p WHERE EXISTS (SELECT 1 FROM orders o WHERE o.product_id = p.id AND o.qty >= 5)
