-- exercises: self join with an inequality on the key
-- tables: orders
-- expect: rows
SELECT a.id AS first, b.id AS second, a.customer_id FROM orders a JOIN orders b ON a.customer_id = b.customer_id AND a.product_id = b.product_id AND a.id < b.id
