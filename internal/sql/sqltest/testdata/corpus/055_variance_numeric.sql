-- exercises: the variance family over integers and numeric (variance, var_pop, stddev, stddev_samp), NULL for one-row groups
-- tables: orders
-- expect: rows
SELECT product_id, variance(qty) AS vq, var_pop(qty) AS vpq, stddev(price) AS sp, stddev_pop(price) AS spp, count(*) AS n
FROM orders GROUP BY product_id
