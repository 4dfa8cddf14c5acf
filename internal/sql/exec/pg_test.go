package exec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/parse"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// table is a test table: its DDL columns and rows as SQL literal text
// (NULL for NULL), loaded the same way into PostgreSQL and, through
// types.Parse, into the in-memory catalog.
type table struct {
	name string
	cols []Column
	rows [][]string
}

var null = "\x00NULL"

var tables = []table{
	{"t1", []Column{{"id", types.Int4}, {"name", types.Text}, {"price", types.NumericPS(10, 2)}, {"qty", types.Int8}, {"f", types.Float8}, {"ts", types.Timestamp}, {"active", types.Bool}, {"doc", types.JSONB}, {"grp", types.VarcharN(10)}},
		[][]string{
			{"1", "apple", "1.50", "10", "0.5", "2024-01-01 10:00:00", "true", `{"a": 1, "b": [1, 2, 3], "c": {"d": "x"}}`, "fruit"},
			{"2", "banana", "0.25", "200", "-2.25", "2024-01-02 11:30:00", "false", `{"a": 2, "b": [], "c": null}`, "fruit"},
			{"3", "carrot", "3.00", "0", "1e10", "2024-02-29 23:59:59.5", "true", `[1, "two", 3.5]`, "veg"},
			{"4", "Daikon", null, "-5", null, null, null, null, "veg"},
			{"5", null, "99999999.99", "9223372036854775807", "0", "1999-12-31 00:00:00", "false", `"str"`, null},
			{"6", "egg%plant", "2.50", null, "3.75", "2024-06-15 12:00:00", "true", `{"a": null}`, "veg"},
			{"7", "fig_", "2.50", "7", "-0.125", "2024-06-15 12:00:00", null, `42`, "fruit"},
		}},
	{"t2", []Column{{"id", types.Int4}, {"t1_id", types.Int4}, {"tag", types.VarcharN(10)}, {"amount", types.Int2}},
		[][]string{
			{"1", "1", "red", "5"},
			{"2", "1", "sweet", "3"},
			{"3", "2", "yellow", null},
			{"4", "9", "orphan", "1"},
			{"5", null, "nobody", "2"},
			{"6", "3", "orange", "-7"},
			{"7", "3", "orange", "4"},
		}},
	{"t3", []Column{{"x", types.Int4}}, nil},
}

// queries are run on PostgreSQL and on the executor; ordered ones
// compare in order, the rest as multisets.
var queries = []string{
	// Literals and operators.
	"SELECT 1, -1, 2147483647, 2147483648, 1.5, -0.0, 1e3, 'txt', true, NULL",
	"SELECT 1 + 2, 7 - 10, 6 * 7, 7 / 2, -7 / 2, 7 % 3, -7 % 3, 2 ^ 10",
	"SELECT 2147483647 + 1",
	"SELECT -2147483648 - 1",
	"SELECT 9223372036854775807 + 1",
	"SELECT 46341 * 46341",
	"SELECT 1 / 0",
	"SELECT 1.0 / 0",
	"SELECT 1.5 / 0.0",
	"SELECT 5 % 0",
	"SELECT 1::float8 / 0",
	"SELECT 32767::int2 + 1::int2",
	"SELECT (-32768)::int2 * -1::int2",
	"SELECT 10 / 3.0, 1 / 3.0, 2.0 / 3, 100.0 / 7, 1 / 7.000, 123456789.0 / 0.001, 0.001 / 3",
	"SELECT 1.10 + 2.205, 1.5 * 1.25, 10.0 - 0.01, 2.50 * 2",
	"SELECT 7.5 % 2, -7.5 % 2, 10 % 3.3",
	"SELECT 1 + 1.5, 1 + 1.5::float8, 1::int2 + 1::int8, 1.5::float4 + 1, 2::numeric * 1.5::float4",
	"SELECT 0.1::float8 + 0.2::float8, 1e308::float8 * 10",
	"SELECT 1e-300::float8 * 1e-300::float8",
	"SELECT 'a' || 'b', 'a' || 1, 1 || 'a', 'x' || NULL, 'b' || true, 'n' || 1.50",
	"SELECT 1 = 1, 1 <> 2, 1 < 2.5, 'a' < 'b', 'B' < 'a', NULL = NULL, 1 = NULL, 2 >= 2, 3 != 3",
	"SELECT 'NaN'::float8 = 'NaN'::float8, 'NaN'::float8 > 1e308, '-0'::float8 = 0",
	"SELECT true AND NULL, false AND NULL, true OR NULL, false OR NULL, NOT NULL::bool, NOT true",
	"SELECT NULL IS NULL, 1 IS NULL, NULL IS NOT NULL, 1 IS DISTINCT FROM NULL, NULL IS DISTINCT FROM NULL, 1 IS NOT DISTINCT FROM 1",
	"SELECT true IS TRUE, NULL::bool IS TRUE, NULL::bool IS UNKNOWN, false IS NOT FALSE, NULL::bool IS NOT TRUE",
	"SELECT 2 BETWEEN 1 AND 3, 5 BETWEEN 1 AND 3, NULL BETWEEN 1 AND 2, 2 NOT BETWEEN 1 AND 3, 2 BETWEEN SYMMETRIC 3 AND 1",
	"SELECT 1 IN (1, 2), 3 IN (1, 2), 3 IN (1, NULL), 1 IN (1, NULL), 3 NOT IN (1, 2), 3 NOT IN (1, NULL), NULL IN (1)",
	"SELECT 'abc' LIKE 'a%', 'abc' LIKE 'a_c', 'abc' LIKE 'b%', 'ABC' ILIKE 'a%', 'abc' NOT LIKE '%c', 'a%b' LIKE 'a\\%b', 'a_b' LIKE 'a!_b' ESCAPE '!', NULL LIKE 'a'",
	"SELECT 'a' LIKE 'a\\'",
	"SELECT 'orders' ~ '^(orders)$', 'orders' OPERATOR(pg_catalog.~) '^(ord)$', 'pg_toast' !~ '^pg_', 'ABC' ~* 'b', 'ABC' !~* 'x', NULL ~ 'a', 'a' ~ NULL",
	"SELECT id, name FROM t1 WHERE name OPERATOR(pg_catalog.~) '^(e|d)' COLLATE pg_catalog.default ORDER BY id",
	// A literal that does not read as the column's type: invalid input
	// (22P02), not a missing operator, and never a crash.
	"SELECT id FROM t1 WHERE id = 'gold'",
	"SELECT id FROM t1 WHERE 'gold' < id",
	"SELECT id FROM t1 WHERE id = true",
	"SELECT 'a' ~ '('",
	"SELECT CASE WHEN 1 > 2 THEN 'x' WHEN 2 > 1 THEN 'y' ELSE 'z' END, CASE 2 WHEN 1 THEN 'one' WHEN 2 THEN 'two' END, CASE WHEN false THEN 1 END",
	"SELECT CASE WHEN true THEN 1 ELSE 2.5 END, CASE 1 WHEN NULL THEN 'n' ELSE 'e' END",
	"SELECT COALESCE(NULL, 2, 3), COALESCE(NULL, NULL), COALESCE(NULL::int, 1.5), NULLIF(1, 1), NULLIF(1, 2), NULLIF(NULL, 1)",
	"SELECT GREATEST(1, 5, 3), LEAST(2.5, 1, NULL), GREATEST(NULL, NULL::int), LEAST('b', 'a')",
	"SELECT CASE WHEN true THEN 1 ELSE 'x' END",
	"SELECT 1 + 'a'",
	"SELECT 'a' + 'b'",
	"SELECT true + 1",
	// Casts.
	"SELECT '12'::int, ' 12 '::int4, '-5'::int2, '9223372036854775807'::int8, '1.5'::numeric, '1e2'::float8, 'yes'::bool, 'off'::boolean",
	"SELECT 'abc'::int",
	"SELECT '99999'::int2",
	"SELECT '1.5'::int",
	"SELECT ''::int8",
	"SELECT 'x'::bool",
	"SELECT 'nope'::numeric",
	"SELECT 1.5::int, 2.5::int, -2.5::int, 1.5::float8::int, 2.5::float8::int, 0.5::float4::int2, 3.7::numeric(3,1)::int8",
	"SELECT 3000000000::int",
	"SELECT 1e20::float8::int8",
	"SELECT 'NaN'::numeric::int",
	"SELECT 70000::int2",
	"SELECT 1::bool, 0::bool, true::int, 12::text, 1.50::text, true::text, 'x'::varchar, 2::numeric, 0.1::float8::numeric, 1e100::float8::numeric",
	"SELECT 1.23456789::float4, 1.23456789::float4::float8, 16777217::float4, 0.1::float4::numeric",
	"SELECT 123.456::numeric(5,1), 0.05::numeric(3,1), -0.05::numeric(3,1), 'abcdef'::varchar(3), 12.5::numeric(4,0)",
	"SELECT 123.45::numeric(4,2)",
	"SELECT CAST('2024-01-15' AS date), '2024-01-15 10:11:12.5'::timestamp, '2024-01-15 10:00+02'::timestamptz, '1 day 02:00'::interval, '{\"k\": [1, 2]}'::jsonb",
	"SELECT '2024-02-30'::date",
	"SELECT 'junk'::timestamp",
	"SELECT 'zzz'::interval",
	"SELECT '{bad'::jsonb",
	"SELECT '2024-01-15 10:11:12'::timestamp::date, '2024-01-15'::date::timestamp, '2024-01-15 10:00:00'::timestamp::timestamptz",
	"SELECT 1::date",
	"SELECT 1::jsonb",
	"SELECT '5'::jsonb::int, '2.5'::jsonb::numeric, 'true'::jsonb::bool, '1.5'::jsonb::float8",
	"SELECT '\"s\"'::jsonb::int",
	"SELECT 'x'::nosuchtype",
	"SELECT CAST(1.5 AS integer), CAST('7' AS bigint) + 1",
	// String functions.
	"SELECT lower('AbC'), upper('aBc'), length('héllo'), char_length(''), octet_length('é'), lower(NULL)",
	"SELECT substring('hello' FROM 2 FOR 3), substring('hello', 2), substr('hello', 0, 3), substr('hello', -1, 3), substring('hello' FROM 10), substr('héllo', 2, 2)",
	"SELECT substr('hello', 2, -1)",
	"SELECT concat('a', 1, NULL, true, 2.50), concat(), concat(NULL)",
	"SELECT trim('  x  '), trim(BOTH 'x' FROM 'xxaxx'), trim(LEADING FROM '  a '), trim(TRAILING 'y' FROM 'ayy'), btrim('..a..', '.'), ltrim('  a'), rtrim('a  ')",
	"SELECT replace('banana', 'an', 'AN'), replace('abc', '', 'x'), split_part('a,b,c', ',', 2), split_part('a,b,c', ',', 5), split_part('a,b,c', ',', -1)",
	"SELECT split_part('a,b', ',', 0)",
	"SELECT position('b' IN 'abc'), position('z' IN 'abc'), strpos('héllo', 'l'), position('' IN 'abc')",
	"SELECT left('hello', 2), right('hello', 2), left('hello', -2), right('hello', -1), reverse('abc'), repeat('ab', 3), repeat('x', -1), starts_with('hello', 'he')",
	"SELECT length(1)",
	"SELECT upper(1.5)",
	// Math.
	"SELECT abs(-5), abs(-5.5), abs(-2.5::float8), abs(-3::int2), abs(0)",
	"SELECT abs(-2147483648)",
	"SELECT round(2.5), round(-2.5), round(2.5::float8), round(3.5::float8), round(1.2345, 2), round(1234.5, -2), round(-0.5), round(5)",
	"SELECT floor(-1.5), floor(1.5::float8), ceil(1.2), ceil(-1.2::float8), ceiling(2.0), trunc(1.99), trunc(-1.99, 1), trunc(2.7::float8), sign(-3.5), sign(0::float8)",
	"SELECT mod(7, 3), mod(-7, 3), mod(7.5, 2), mod(7::int8, -3::int8), 9 % -4",
	"SELECT mod(1, 0)",
	"SELECT power(2, 10), power(2.0, 0.5), pow(9::float8, 0.5), sqrt(16), sqrt(2::float8), sqrt(2.0), sqrt(0.0001), |/ 25::float8",
	"SELECT sqrt(-1)",
	"SELECT power(0, -1)",
	"SELECT power(-8, 1.0/3)",
	// Dates and times.
	"SELECT '2024-01-31'::date + 1, '2024-03-01'::date - 1, '2024-03-01'::date - '2024-02-01'::date, 7 + '2024-01-01'::date",
	"SELECT '2024-01-31'::date + '1 month'::interval, '2024-01-31 10:00'::timestamp + '1 mon 1 day 01:00'::interval, '2024-03-31'::timestamp - '1 month'::interval",
	"SELECT '2024-01-02 00:00'::timestamp - '2024-01-01 12:00'::timestamp, '2024-03-01'::timestamp - '2024-01-01'::timestamp",
	"SELECT '1 day'::interval + '2 hours'::interval, '1 mon'::interval - '1 day'::interval, -'1 day 2 hours'::interval, '3 days'::interval * 1.5, '1 mon'::interval / 4, 2 * '1 hour'::interval",
	"SELECT '1 day'::interval / 0",
	"SELECT '1 mon'::interval = '30 days'::interval, '1 day'::interval < '25 hours'::interval, '1 year'::interval > '360 days'::interval",
	"SELECT '2024-01-15 10:00:00'::timestamp + '1 day', '2024-01-15'::date < '2024-01-16 00:00:01'::timestamp",
	"SELECT date_trunc('month', '2024-05-17 13:45:12.5'::timestamp), date_trunc('hour', '2024-05-17 13:45:12'::timestamp), date_trunc('year', '2024-05-17'::timestamp), date_trunc('week', '2024-05-17'::timestamp), date_trunc('quarter', '2024-05-17'::timestamp), date_trunc('minute', '2024-05-17 13:45:59'::timestamptz)",
	"SELECT date_trunc('day', '1 day 05:30:00'::interval), date_trunc('hour', '2 days 03:25:00'::interval)",
	"SELECT date_trunc('fortnight', '2024-05-17'::timestamp)",
	"SELECT extract(year FROM '2024-05-17 13:45:12.25'::timestamp), extract(month FROM '2024-05-17'::date), extract(second FROM '2024-05-17 13:45:12.25'::timestamp), extract(epoch FROM '2024-05-17 13:45:12.25'::timestamp), extract(dow FROM '2024-05-17'::timestamp), extract(doy FROM '2024-05-17'::timestamp)",
	"SELECT extract(hour FROM '2 days 03:25:00'::interval), extract(epoch FROM '1 day 01:00:00'::interval), extract(day FROM '5 days'::interval), extract(minute FROM '01:25:00'::interval)",
	"SELECT date_part('year', '2024-05-17 13:45:12'::timestamp), date_part('epoch', '2024-05-17 13:45:12.5'::timestamp), date_part('hour', '01:30:00'::interval), date_part('quarter', '2024-11-01'::date)",
	"SELECT to_timestamp(0), to_timestamp(1700000000.5), to_timestamp(-1)",
	"SELECT extract(epoch FROM '2024-01-01'::date)",
	// JSON.
	"SELECT '{\"a\": {\"b\": [10, 20]}}'::jsonb -> 'a', '{\"a\": {\"b\": [10, 20]}}'::jsonb -> 'a' -> 'b' -> 1, '{\"a\": \"x\"}'::jsonb ->> 'a', '[1, 2, 3]'::jsonb -> -1, '[1, 2]'::jsonb -> 5, '{\"a\": 1}'::jsonb -> 'zz'",
	"SELECT '{\"a\": {\"b\": [10, 20]}}'::jsonb #> '{a,b,0}', '{\"a\": {\"b\": [10, 20]}}'::jsonb #>> '{a,b}', '{\"a\": null}'::jsonb ->> 'a', '{\"a\": null}'::jsonb -> 'a', '\"s\"'::jsonb ->> 0",
	"SELECT '{\"a\": 1}'::jsonb || '{\"b\": 2}'::jsonb, '[1]'::jsonb || '[2, 3]'::jsonb, '{\"a\": 1}'::jsonb || '{\"a\": 3}'::jsonb, '1'::jsonb || '[2]'::jsonb",
	"SELECT '{\"b\": 1, \"a\": 2}'::jsonb = '{\"a\": 2, \"b\": 1}'::jsonb, '[1, 2]'::jsonb < '[1, 3]'::jsonb, '{\"a\": 1}'::jsonb > '[1]'::jsonb",
	"SELECT jsonb_typeof('{}'), jsonb_typeof('[]'), jsonb_typeof('1.5'), jsonb_typeof('null'), jsonb_array_length('[1, [2], 3]')",
	"SELECT jsonb_array_length('{}')",
	"SELECT '{\"a\":1}'::jsonb #> '{a'",
	// Functions and operators that do not exist.
	"SELECT nosuchfunc(1)",
	"SELECT 'a'::text - 1",
	"SELECT missing_col",
	"SELECT * FROM nosuchtable",
	// FROM, WHERE, projections.
	"SELECT * FROM t1",
	"SELECT id, name AS n, price * 2 AS double_price, qty + 1 FROM t1",
	"SELECT t1.id, t1.name FROM t1 WHERE active",
	"SELECT id FROM t1 WHERE price > 2 AND grp = 'veg'",
	"SELECT id FROM t1 WHERE price IS NULL OR f < 0",
	"SELECT id, name FROM t1 WHERE name LIKE '%a%' ORDER BY id",
	"SELECT id FROM t1 WHERE name LIKE 'egg\\%%'",
	"SELECT id FROM t1 WHERE name ILIKE 'd%'",
	"SELECT id, doc -> 'a' AS a, doc ->> 'a' AS a_text, doc #>> '{c,d}' AS cd FROM t1 ORDER BY id",
	"SELECT id, (doc ->> 'a')::int + 1 FROM t1 WHERE doc ->> 'a' IS NOT NULL ORDER BY 1",
	"SELECT id FROM t1 WHERE ts >= '2024-01-02' ORDER BY ts DESC, id",
	"SELECT id, extract(month FROM ts) AS m, date_trunc('day', ts) AS d FROM t1 ORDER BY id",
	"SELECT id, ts + '1 day' AS tomorrow FROM t1 ORDER BY id",
	"SELECT id, qty * 2 FROM t1 WHERE id = 5",
	"SELECT id, CASE WHEN price > 2 THEN 'dear' WHEN price IS NULL THEN 'unknown' ELSE 'cheap' END AS c FROM t1 ORDER BY id",
	"SELECT id FROM t1 WHERE id IN (1, 3, 99) ORDER BY id",
	"SELECT id FROM t1 WHERE grp NOT IN ('veg') ORDER BY id",
	"SELECT id FROM t1 WHERE id BETWEEN 2 AND 4",
	"SELECT nosuch FROM t1",
	"SELECT t9.id FROM t1",
	"SELECT id FROM t1 WHERE name",
	"SELECT id FROM t1, t2",
	"SELECT id FROM t1 WHERE count(*) > 1",
	// GROUP BY, aggregates, HAVING.
	"SELECT count(*), count(price), count(DISTINCT price), sum(qty), sum(price), avg(price), min(name), max(name), avg(f), sum(f) FROM t1",
	"SELECT grp, count(*) FROM t1 GROUP BY grp",
	"SELECT grp, sum(price) AS total, avg(qty) AS avg_qty, min(ts), max(ts) FROM t1 GROUP BY grp ORDER BY grp",
	"SELECT grp, count(*) FROM t1 GROUP BY grp HAVING count(*) > 2",
	"SELECT grp, bool_and(active), bool_or(active), every(active) FROM t1 GROUP BY grp ORDER BY grp NULLS FIRST",
	"SELECT grp, string_agg(name, ', ' ORDER BY name) FROM t1 GROUP BY grp ORDER BY 1",
	"SELECT string_agg(DISTINCT grp, '|' ORDER BY grp) FROM t1",
	"SELECT count(*) FILTER (WHERE active), sum(qty) FILTER (WHERE qty > 0) FROM t1",
	"SELECT count(*), sum(x), avg(x), min(x), max(x), string_agg(x::text, ',') FROM t3",
	"SELECT x, count(*) FROM t3 GROUP BY x",
	"SELECT sum(amount), avg(amount), sum(amount::int4), avg(id) FROM t2",
	"SELECT t1_id, sum(amount) FROM t2 GROUP BY t1_id ORDER BY t1_id NULLS FIRST",
	"SELECT length(grp) AS l, count(*) FROM t1 GROUP BY length(grp) ORDER BY l NULLS LAST",
	"SELECT grp, count(*) FROM t1 GROUP BY 1 ORDER BY 2 DESC, 1",
	"SELECT upper(grp) AS g, count(*) FROM t1 GROUP BY g ORDER BY g",
	"SELECT count(*) + 1, max(id) - min(id) FROM t1",
	"SELECT id, count(*) FROM t1",
	"SELECT grp, name FROM t1 GROUP BY grp",
	"SELECT sum(name) FROM t1",
	"SELECT max(count(*)) FROM t1",
	"SELECT avg(qty) FROM t1 WHERE id <> 5",
	// Variances: numeric results at PostgreSQL's scales, float8 by
	// Youngs-Cramer, NULL under two values (samples) or none.
	"SELECT var_samp(price), var_pop(price), stddev_samp(price), stddev_pop(price), variance(price), stddev(price) FROM t1",
	"SELECT var_samp(id), var_pop(id), stddev_samp(id), stddev_pop(id) FROM t1",
	"SELECT var_samp(amount), var_pop(amount), stddev(amount), stddev_pop(amount) FROM t2",
	"SELECT var_samp(qty), stddev_pop(qty) FROM t1 WHERE id <> 5",
	"SELECT var_samp(qty), var_pop(qty), stddev_samp(qty) FROM t1",
	"SELECT var_samp(f), var_pop(f), stddev_samp(f), stddev_pop(f), variance(f::float4) FROM t1",
	"SELECT grp, var_samp(price), stddev_pop(f), variance(id) FROM t1 GROUP BY grp ORDER BY grp",
	"SELECT var_samp(x), var_pop(x), stddev(x) FROM t3",
	"SELECT var_samp(id), var_pop(id), stddev_samp(price), stddev_pop(price) FROM t1 WHERE id = 3",
	"SELECT var_samp(DISTINCT price), stddev_pop(price) FILTER (WHERE id > 2) FROM t1",
	"SELECT var_pop(v), var_samp(v), stddev(v) FROM (VALUES (1.5::numeric), ('NaN'), (2)) AS x(v)",
	"SELECT var_pop(v), var_samp(v) FROM (VALUES ('Infinity'::float8), (1)) AS x(v)",
	"SELECT var_pop(v), stddev_samp(v) FROM (VALUES (0.1), (0.2), (0.35), (1e-20)) AS x(v)",
	"SELECT var_samp(v), stddev_samp(v) FROM (VALUES (123456789012.345), (-98765.4321), (7)) AS x(v)",
	"SELECT var_samp(v), stddev_samp(v) FROM (VALUES (1e300::float8), (-1e300::float8)) AS x(v)",
	"SELECT var_samp(name) FROM t1",
	"SELECT id FROM t1 WHERE var_samp(id) > 0",
	// A function PostgreSQL does not have is 42883 before any grouping
	// error its arguments would raise.
	"SELECT no_such_fn(id) FROM t1 GROUP BY grp",
	"SELECT no_such_fn(price, name), count(*) FROM t1",
	"SELECT grp, no_such_fn(grp) FROM t1 GROUP BY grp",
	"SELECT no_such_fn(nope) FROM t1 GROUP BY grp",
	"SELECT sum(qty) FROM t1",
	"SELECT avg(price * qty), sum(price * qty) FROM t1 WHERE id < 5",
	"SELECT avg(ts - '2024-01-01'::timestamp), sum('1 hour'::interval) FROM t1",
	// ORDER BY, LIMIT, DISTINCT.
	"SELECT id, name FROM t1 ORDER BY name",
	"SELECT id, name FROM t1 ORDER BY name DESC",
	"SELECT id, name FROM t1 ORDER BY name NULLS FIRST",
	"SELECT id, name FROM t1 ORDER BY name DESC NULLS LAST",
	"SELECT id, price FROM t1 ORDER BY price DESC, id",
	"SELECT id, f FROM t1 ORDER BY f, id",
	"SELECT id AS k FROM t1 ORDER BY k DESC LIMIT 3",
	"SELECT id FROM t1 ORDER BY id LIMIT 2 OFFSET 3",
	"SELECT id FROM t1 ORDER BY id OFFSET 5",
	"SELECT id FROM t1 ORDER BY id LIMIT 0",
	"SELECT id FROM t1 ORDER BY id LIMIT ALL",
	"SELECT id FROM t1 ORDER BY id FETCH FIRST 2 ROWS ONLY",
	"SELECT id FROM t1 ORDER BY id LIMIT -1",
	"SELECT id FROM t1 ORDER BY qty * -1 NULLS FIRST, id",
	"SELECT name FROM t1 ORDER BY 2",
	"SELECT DISTINCT grp FROM t1",
	"SELECT DISTINCT grp, active FROM t1 ORDER BY grp, active",
	"SELECT DISTINCT price FROM t1 ORDER BY price NULLS FIRST",
	"SELECT DISTINCT grp FROM t1 ORDER BY id",
	"SELECT count(DISTINCT grp), count(DISTINCT t1_id) FROM t1, t2",
	// Joins.
	"SELECT t1.id, t2.tag FROM t1 JOIN t2 ON t1.id = t2.t1_id ORDER BY t1.id, t2.tag",
	"SELECT t1.id, t2.tag FROM t1 LEFT JOIN t2 ON t1.id = t2.t1_id ORDER BY t1.id, t2.tag",
	"SELECT t1.id, t2.tag FROM t1 RIGHT JOIN t2 ON t1.id = t2.t1_id ORDER BY t2.tag, t1.id",
	"SELECT t1.id, t2.id FROM t1 FULL JOIN t2 ON t1.id = t2.t1_id ORDER BY 1 NULLS FIRST, 2 NULLS FIRST",
	"SELECT a.id, b.id FROM t1 a CROSS JOIN t2 b WHERE a.id < 3 AND b.id < 3",
	"SELECT a.id, b.tag FROM t1 a JOIN t2 b ON a.id = b.t1_id AND b.amount > 3",
	"SELECT a.id, b.tag FROM t1 a JOIN t2 b ON a.id < b.t1_id WHERE a.id > 1 ORDER BY 1, 2",
	"SELECT a.id, b.tag FROM t1 a LEFT JOIN t2 b ON a.id = b.t1_id AND b.tag LIKE 'o%' ORDER BY 1, 2",
	"SELECT a.id, b.tag FROM t1 a FULL JOIN t2 b ON a.id = b.t1_id + 0 AND a.active ORDER BY 1, 2",
	"SELECT * FROM t2 JOIN t2 AS u USING (id) WHERE id < 3",
	"SELECT * FROM t1 JOIN t2 USING (id) ORDER BY id",
	"SELECT id, name, tag FROM t1 LEFT JOIN t2 USING (id) ORDER BY id",
	"SELECT id FROM t1 FULL JOIN (SELECT id + 5 AS id FROM t2) s USING (id) ORDER BY id",
	"SELECT * FROM t3 NATURAL JOIN t3 AS u",
	"SELECT t1.name, count(t2.id) FROM t1 LEFT JOIN t2 ON t2.t1_id = t1.id GROUP BY t1.name ORDER BY t1.name NULLS FIRST",
	"SELECT a.id, b.id, c.id FROM t1 a JOIN t2 b ON a.id = b.t1_id JOIN t2 c ON c.id = b.id ORDER BY 1, 2",
	// WHERE over inner joins: one side's conjuncts filter that side
	// (exec/pushdown.go), the rest the joined rows.
	"SELECT a.id, b.tag FROM t1 a JOIN t2 b ON a.id = b.t1_id WHERE a.active AND (b.tag = 'red' OR b.tag = 'orange') ORDER BY 1, 2",
	"SELECT a.id, b.tag FROM t1 a JOIN t2 b ON a.id = b.t1_id WHERE b.amount > a.qty - 10 AND a.name IS NOT NULL AND b.amount IS NULL ORDER BY 1, 2",
	"SELECT a.id, b.id, c.tag FROM t1 a JOIN t2 b ON a.id = b.t1_id JOIN t2 c ON c.id = b.id WHERE c.amount > 0 AND a.grp = 'fruit' AND b.id + c.id > 2 ORDER BY 1, 2",
	"SELECT a.id, b.id FROM t1 a JOIN t2 b ON a.id = b.t1_id WHERE lower(a.name) LIKE '%a%' AND b.id IN (SELECT t1_id FROM t2) ORDER BY 1, 2",
	"SELECT a.id, b.id FROM t1 a LEFT JOIN t2 b ON a.id = b.t1_id WHERE b.amount IS NULL AND a.id > 1 ORDER BY 1, 2",
	"SELECT a.id FROM t1 a JOIN t2 b ON a.id = b.t1_id WHERE id > 1",
	"SELECT a.id FROM t1 a JOIN t2 b ON a.id = b.t1_id WHERE b.amount / 0 > 1",
	"SELECT x.id, x.tag FROM (t1 a JOIN t2 b ON a.id = b.t1_id) AS x WHERE x.amount > 2 ORDER BY 1, 2",
	"SELECT id FROM t1 JOIN t2 ON t1.id = t2.t1_id",
	"SELECT t1.id FROM t1 JOIN t2 ON t1.name = t2.id",
	"SELECT x.id FROM t1 x, t1 y WHERE x.id = y.id + 1 ORDER BY 1",
	"SELECT a.id FROM t1 a JOIN t2 b ON a.price = b.amount",
	"SELECT a.id, b.id FROM t1 a JOIN t2 b ON a.f = b.amount",
	// Subqueries.
	"SELECT * FROM (SELECT id, name FROM t1 WHERE id < 4) s ORDER BY id",
	"SELECT s.n FROM (SELECT count(*) AS n FROM t1) s",
	"SELECT c, g FROM (SELECT grp AS g, count(*) AS c FROM t1 GROUP BY grp) AS s (c0, g0) ORDER BY 1",
	"SELECT g, c FROM (SELECT grp, count(*) FROM t1 GROUP BY grp) AS s (g, c) ORDER BY 1",
	"SELECT (SELECT max(id) FROM t2), (SELECT name FROM t1 WHERE id = 1), (SELECT x FROM t3)",
	"SELECT (SELECT id FROM t1)",
	"SELECT id FROM t1 WHERE id IN (SELECT t1_id FROM t2) ORDER BY id",
	"SELECT id FROM t1 WHERE id NOT IN (SELECT t1_id FROM t2)",
	"SELECT id FROM t1 WHERE id NOT IN (SELECT t1_id FROM t2 WHERE t1_id IS NOT NULL) ORDER BY id",
	"SELECT id FROM t1 WHERE EXISTS (SELECT 1 FROM t2 WHERE amount > 4) AND id < 3",
	"SELECT id FROM t1 WHERE NOT EXISTS (SELECT 1 FROM t3)",
	"SELECT id FROM t1 WHERE price > (SELECT avg(price) FROM t1) ORDER BY id",
	"SELECT id FROM t1 WHERE id = ANY (SELECT t1_id FROM t2) ORDER BY id",
	"SELECT id FROM t1 WHERE id > ALL (SELECT t1_id FROM t2 WHERE t1_id IS NOT NULL) ORDER BY id",
	"SELECT id, (SELECT count(*) FROM t2) - id AS d FROM t1 ORDER BY d",
	// Correlated subqueries: per outer row, in the select list, WHERE,
	// EXISTS, IN and ALL, two levels deep, through a join's key, with
	// an aggregate inside, and names the inner query shadows.
	"SELECT id, (SELECT count(*) FROM t2 WHERE t2.t1_id = t1.id) AS n FROM t1 ORDER BY id",
	"SELECT id, (SELECT max(amount) FROM t2 WHERE t1_id = t1.id AND amount > t1.price) FROM t1 ORDER BY id",
	"SELECT id FROM t1 WHERE EXISTS (SELECT 1 FROM t2 WHERE t2.t1_id = t1.id) ORDER BY id",
	"SELECT id FROM t1 a WHERE NOT EXISTS (SELECT 1 FROM t2 b WHERE b.t1_id = a.id AND b.amount > 4) ORDER BY id",
	"SELECT id FROM t1 WHERE price IN (SELECT amount FROM t2 WHERE t2.t1_id = t1.id) ORDER BY id",
	"SELECT id FROM t1 WHERE price > ALL (SELECT amount FROM t2 WHERE t2.t1_id = t1.id AND amount IS NOT NULL) ORDER BY id",
	"SELECT id, (SELECT count(*) FROM t2 WHERE t2.t1_id = t1.id AND EXISTS (SELECT 1 FROM t3 WHERE t3.x < t1.id + t2.amount)) FROM t1 ORDER BY id",
	"SELECT a.id, (SELECT b.tag FROM t2 b JOIN t1 c ON c.id = b.t1_id WHERE c.id = a.id ORDER BY b.id LIMIT 1) FROM t1 a ORDER BY a.id",
	"SELECT id, (SELECT id FROM t2 WHERE t1_id = t1.id ORDER BY id DESC LIMIT 1) FROM t1 ORDER BY id",
	"SELECT id, (SELECT id FROM t2 WHERE t2.t1_id = t1.id) FROM t1 ORDER BY id",
	"SELECT grp, (SELECT count(*) FROM t2 WHERE t2.tag = t1.grp) FROM t1 GROUP BY grp ORDER BY grp",
	"SELECT id FROM t1 WHERE (SELECT nope FROM t2 WHERE t2.t1_id = t1.id) > 0",
	// generate_series in FROM, its column named by the alias.
	"SELECT * FROM generate_series(1, 5)",
	"SELECT s FROM generate_series(10, 1, -3) s",
	"SELECT g.n FROM generate_series(1, 3) AS g(n) ORDER BY n DESC",
	"SELECT * FROM generate_series(9223372036854775806, 9223372036854775807)",
	"SELECT * FROM generate_series(1, NULL)",
	"SELECT * FROM generate_series(1, 3, 0)",
	"SELECT id, (SELECT count(*) FROM generate_series(1, t1.id) s WHERE s % 2 = 0) FROM t1 ORDER BY id",
	"SELECT a.s, b.s FROM generate_series(1, 2) a, generate_series(1, 2) b ORDER BY 1, 2",
	// Set operations, VALUES, WITH.
	"SELECT id FROM t1 UNION SELECT t1_id FROM t2",
	"SELECT id FROM t1 UNION ALL SELECT t1_id FROM t2",
	"SELECT grp FROM t1 UNION SELECT tag FROM t2 ORDER BY 1",
	"SELECT id FROM t1 INTERSECT SELECT t1_id FROM t2",
	"SELECT id FROM t1 EXCEPT SELECT t1_id FROM t2",
	"SELECT t1_id FROM t2 INTERSECT ALL SELECT t1_id FROM t2",
	"SELECT t1_id FROM t2 EXCEPT ALL SELECT 3",
	"SELECT 1 UNION SELECT 1.5 UNION SELECT 2 ORDER BY 1 DESC",
	"SELECT 'a' UNION SELECT 'b' ORDER BY 1",
	"SELECT 1 UNION SELECT 'x'",
	"SELECT 1, 2 UNION SELECT 1",
	"SELECT id FROM t1 UNION SELECT id FROM t2 ORDER BY id LIMIT 3",
	"VALUES (1, 'one'), (2, 'two'), (3, NULL)",
	"VALUES (1), (2.5), (NULL) ORDER BY 1",
	"SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS v (n, s) WHERE n > 1",
	"VALUES (1, 2), (3)",
	"WITH big AS (SELECT * FROM t1 WHERE price > 2) SELECT id, name FROM big ORDER BY id",
	"WITH a AS (SELECT grp, count(*) AS n FROM t1 GROUP BY grp), b AS (SELECT max(n) AS m FROM a) SELECT grp FROM a, b WHERE n = m",
	"WITH c (k) AS (SELECT id FROM t1) SELECT sum(k) FROM c",
	"WITH c AS (SELECT id FROM t1) SELECT count(*) FROM c x JOIN c y ON x.id = y.id",
	// Parameters would need values; literals of every type from tables.
	"SELECT id, price::text, qty::numeric / 3, f::numeric, active::int FROM t1 ORDER BY id",
	"SELECT id, amount * 1000, amount::int4 * 100000 FROM t2 ORDER BY id",
	"SELECT amount * 10000 FROM t2",
	"SELECT id, tag || '!' , length(tag), upper(tag) FROM t2 ORDER BY id",
	"SELECT grp || id, concat(grp, '-', id) FROM t1 ORDER BY id",
	"SELECT coalesce(name, grp, 'none') FROM t1 ORDER BY id",
	"SELECT id, nullif(grp, 'veg') FROM t1 ORDER BY id",
	"SELECT id, greatest(price, 2), least(qty, 100) FROM t1 ORDER BY id",
	"SELECT id, round(f), round(price, 1), floor(f), ceil(price) FROM t1 ORDER BY id",
	"SELECT id, qty / 3, qty % 3, qty / 0 FROM t1 WHERE qty = 0",
	"SELECT id, f / 0 FROM t1 WHERE id = 1",
	"SELECT id, qty * 2 FROM t1 WHERE qty > 1000",
}

// run is one side's answer: column names and type OIDs, rows as text,
// or an error's SQLSTATE.
type answer struct {
	names []string
	oids  []uint32
	rows  []string
	code  string
	msg   string
}

func pgAnswer(ctx context.Context, conn *pgx.Conn, q string) answer {
	rr := conn.PgConn().ExecParams(ctx, q, nil, nil, nil, nil)
	var rows [][][]byte
	for rr.NextRow() {
		var row [][]byte
		for _, v := range rr.Values() {
			row = append(row, slices.Clone(v))
		}
		rows = append(rows, row)
	}
	fields := rr.FieldDescriptions()
	if _, err := rr.Close(); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return answer{code: pe.Code, msg: pe.Message}
		}
		return answer{code: "??", msg: err.Error()}
	}
	var a answer
	for _, f := range fields {
		a.names, a.oids = append(a.names, f.Name), append(a.oids, f.DataTypeOID)
	}
	for _, row := range rows {
		var vals []string
		for _, v := range row {
			if v == nil {
				vals = append(vals, "NULL")
			} else {
				vals = append(vals, string(v))
			}
		}
		a.rows = append(a.rows, strings.Join(vals, " | "))
	}
	return a
}

func ourAnswer(ctx context.Context, cat Catalog, q string) answer {
	fail := func(err error) answer {
		code := sqlerr.Code(err)
		if code == "" {
			if parse.IsSyntax(err) {
				code = sqlerr.SyntaxError
			} else {
				code = "XX000"
			}
		}
		return answer{code: code, msg: err.Error()}
	}
	stmts, err := parse.Parse(q)
	if err != nil {
		return fail(err)
	}
	st := stmts[0].Node.GetSelectStmt()
	if st == nil {
		return answer{code: "??", msg: "not a SELECT"}
	}
	plan, err := Plan(cat, st, nil, Options{})
	if err != nil {
		return fail(err)
	}
	var a answer
	for _, c := range plan.Columns() {
		a.names, a.oids = append(a.names, c.Name), append(a.oids, c.Type.OID)
	}
	it, err := plan.Run(ctx, nil, time.Now())
	if err != nil {
		return fail(err)
	}
	for {
		row, ok, err := it.Next(ctx)
		if err != nil {
			return fail(err)
		}
		if !ok {
			break
		}
		var vals []string
		for i, v := range row {
			if v == nil {
				vals = append(vals, "NULL")
			} else {
				vals = append(vals, types.FormatTyped(plan.Columns()[i].Type, v))
			}
		}
		a.rows = append(a.rows, strings.Join(vals, " | "))
	}
	return a
}

// loadTables creates the tables in PostgreSQL and returns them as a
// catalog for the executor.
func loadTables(t *testing.T, ctx context.Context, conn *pgx.Conn) MemCatalog {
	t.Helper()
	cat := MemCatalog{}
	for _, tb := range tables {
		var defs []string
		for _, c := range tb.cols {
			name := c.Type.Name()
			defs = append(defs, c.Name+" "+name)
		}
		if _, err := conn.Exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS %s; CREATE TABLE %s (%s)", tb.name, tb.name, strings.Join(defs, ", "))); err != nil {
			t.Fatal(err)
		}
		rel := &MemRelation{Cols: tb.cols}
		for _, r := range tb.rows {
			var lits []string
			row := make(types.Row, len(r))
			for i, v := range r {
				if v == null {
					lits = append(lits, "NULL")
					continue
				}
				lits = append(lits, "'"+strings.ReplaceAll(v, "'", "''")+"'")
				x, err := types.Parse(tb.cols[i].Type, v)
				if err != nil {
					t.Fatalf("%s: %q: %v", tb.name, v, err)
				}
				row[i] = x
			}
			if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s VALUES (%s)", tb.name, strings.Join(lits, ", "))); err != nil {
				t.Fatal(err)
			}
			rel.Rows = append(rel.Rows, row)
		}
		cat[tb.name] = rel
	}
	return cat
}

// TestAgainstPostgres runs every query on PostgreSQL and on the
// executor and compares names, type OIDs, values (in order only under
// an ORDER BY) and SQLSTATEs.
func TestAgainstPostgres(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'; SET extra_float_digits = 1; SET IntervalStyle = postgres; SET DateStyle = 'ISO, MDY'"); err != nil {
		t.Fatal(err)
	}
	cat := loadTables(t, ctx, conn)
	if len(queries) < 150 {
		t.Fatalf("only %d queries", len(queries))
	}
	failed := 0
	for _, q := range queries {
		want := pgAnswer(ctx, conn, q)
		got := ourAnswer(ctx, cat, q)
		if msg := compareAnswers(q, want, got); msg != "" {
			failed++
			t.Errorf("%s\n%s", q, msg)
		}
	}
	t.Logf("%d queries, %d differ", len(queries), failed)
}

func compareAnswers(q string, want, got answer) string {
	if want.code != "" || got.code != "" {
		if want.code != got.code {
			return fmt.Sprintf("  PostgreSQL: %s %s\n  Strand:     %s %s %v", want.code, want.msg, got.code, got.msg, got.rows)
		}
		return ""
	}
	if !slices.Equal(want.names, got.names) {
		return fmt.Sprintf("  names: PostgreSQL %v, Strand %v", want.names, got.names)
	}
	if !slices.Equal(want.oids, got.oids) {
		return fmt.Sprintf("  types: PostgreSQL %v, Strand %v", want.oids, got.oids)
	}
	w, g := want.rows, got.rows
	if !strings.Contains(strings.ToUpper(q), "ORDER BY") || strings.Contains(q, "string_agg(x::text") {
		w, g = slices.Clone(w), slices.Clone(g)
		slices.Sort(w)
		slices.Sort(g)
	}
	if !slices.Equal(w, g) {
		return fmt.Sprintf("  PostgreSQL rows: %q\n  Strand rows:     %q", w, g)
	}
	return ""
}

// TestPostgresAggregates checks expr.PostgresAggregates against the
// server's pg_proc, both ways (for the names its version has), and that each PostgreSQL aggregate the
// executor lacks is refused with 0A000 naming it.
func TestPostgresAggregates(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT DISTINCT proname::text FROM pg_proc WHERE prokind = 'a' AND pronamespace = 'pg_catalog'::regnamespace ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var versionNum int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&versionNum); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, ok := expr.PostgresAggregates[n]; !ok {
			t.Errorf("PostgreSQL has aggregate %s; expr.PostgresAggregates lacks it", n)
		}
	}
	for n, since := range expr.PostgresAggregates {
		if since <= versionNum/10000 && !slices.Contains(names, n) {
			t.Errorf("expr.PostgresAggregates names %s (since %d); PostgreSQL %d has no such aggregate", n, since, versionNum)
		}
	}
	cat := loadTables(t, ctx, conn)
	for _, n := range names {
		if expr.Aggregates[n] {
			continue
		}
		got := ourAnswer(ctx, cat, "SELECT "+n+"(id) FROM t1 GROUP BY grp")
		if got.code != sqlerr.FeatureNotSupported || !strings.Contains(got.msg, n) {
			t.Errorf("%s(id): got %s %s; want 0A000 naming it", n, got.code, got.msg)
		}
	}
}
