-- exercises: var_samp, stddev_pop over float8
-- tables: orders
-- expect: rows
SELECT status, var_samp(discount) AS var, stddev_pop(discount) AS sd, count(discount) AS n FROM orders GROUP BY status
