// Package viewplan owns compiling a materialized view's SELECT into an
// incremental dataflow (package flow): the graph of operators that
// keeps the view's contents equal to the query's answer as its inputs
// change, the view's output columns and the key its contents are
// indexed by, and the relations it reads.
//
// Names, types, aggregates and joins are resolved by package exec's
// planner (the batch planner), so a view and an ad-hoc SELECT read the
// same SQL the same way; this package rewrites the few streaming forms
// the batch planner does not know into relations of its own first, then
// compiles exec's plan (exec.Logical) node by node:
//
//   - WHERE and HAVING: flow.Filter; the select list: flow.Project when
//     it only picks columns, flow.Map otherwise.
//   - GROUP BY with COUNT, COUNT(DISTINCT), SUM, AVG, MIN, MAX, bool_and,
//     bool_or (FILTER as a NULLed argument): flow.Aggregate.
//   - SELECT DISTINCT and UNION: flow.Distinct; UNION ALL: flow.Union.
//   - Joins (inner, left, right, full, n-way, written with JOIN ... ON,
//     USING, or as FROM a, b WHERE with the equalities between the
//     sides): flow.Join on the ON clause's equalities, the other ON terms
//     a filter after an inner join. A cross join with a constant
//     relation (generate_series, VALUES) repeats each row.
//   - Semi- and anti-joins: x IN (SELECT y ...) and [NOT] EXISTS
//     (SELECT ... WHERE inner = outer ...) as WHERE terms: a join with
//     (a left join keeping the unmatched rows of) the subquery's
//     distinct keys (semijoin.go).
//   - Top-N: ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) AS rn in a
//     subquery in FROM, bounded by rn <= N (or < N, = N, BETWEEN) in the
//     WHERE over it, and ORDER BY ... LIMIT [OFFSET]: flow.TopN.
//   - Windows: GROUP BY a computed window start, or FROM TUMBLE(rel,
//     time_col, size) / HOP(rel, time_col, slide, size), which append
//     window_start and window_end: flow.Tumble and flow.Hop.
//   - WITH queries and subqueries in FROM: compiled once, a WITH query
//     read twice is one node read twice.
//   - Views over views: a relation of the Catalog may be another view;
//     its changes are an input like a source's.
//
// Refused with 0A000 (feature_not_supported), naming the construct:
// other subqueries in expressions (scalar ones, NOT IN, correlation
// other than by equalities),
// other window functions, joins without an equality between the sides
// (cross and non-equi joins, except with a constant relation), outer
// joins with other ON terms, INTERSECT and EXCEPT, LIMIT without ORDER
// BY, aggregates flow does not keep retractably (string_agg,
// statistics, SUM/AVG DISTINCT, SUM of intervals), LATERAL, and
// non-deterministic functions (now(), random()): a view must be a
// deterministic function of its inputs.
//
// ORDER BY without LIMIT is accepted and ignored, with a notice (View.
// Notices): a view's rows have no order (PostgreSQL's view keeps the
// ORDER BY for the SELECT that reads it; Materialize and RisingWave
// ignore it in a materialized view, as Strand does); a reader orders
// what it reads.
package viewplan
