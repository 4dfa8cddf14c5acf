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
//     bool_or, string_agg (ORDER BY inside), the variance family
//     (FILTER as a NULLed argument): flow.Aggregate.
//   - SELECT DISTINCT and UNION: flow.Distinct; UNION ALL: flow.Union;
//     INTERSECT and EXCEPT [ALL]: flow.SetOp.
//   - Joins (inner, left, right, full, n-way, written with JOIN ... ON,
//     USING, or as FROM a, b WHERE with the equalities between the
//     sides): flow.Join on the ON clause's equalities, the other ON terms
//     a filter after an inner join, or evaluated by flow.ResidualJoin
//     for an outer one. A cross join with a constant relation
//     (generate_series, VALUES) repeats each row.
//   - Uncorrelated scalar subqueries in the select list, WHERE and
//     HAVING: a left join with the one-row subquery (scalar.go).
//   - Semi- and anti-joins: x IN (SELECT y ...) and [NOT] EXISTS
//     (SELECT ... WHERE inner = outer ...) as WHERE terms: a join with
//     (a left join keeping the unmatched rows of) the subquery's
//     distinct keys (semijoin.go).
//   - Top-N: ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) AS rn in a
//     subquery in FROM, bounded by rn <= N (or < N, = N, BETWEEN) in the
//     WHERE over it, and ORDER BY ... LIMIT [OFFSET]: flow.TopN. A
//     LATERAL subquery correlated by equalities, with ORDER BY ...
//     LIMIT, is rewritten into the first form joined on its keys
//     (lateral.go).
//   - count/sum/avg/min/max OVER (PARTITION BY ... ORDER BY ... ROWS
//     BETWEEN n PRECEDING AND CURRENT ROW) in the select list:
//     flow.RowsWindow (rowswindow.go).
//   - Windows: GROUP BY a computed window start, or FROM TUMBLE(rel,
//     time_col, size) / HOP(rel, time_col, slide, size) /
//     SESSION(rel, time_col, gap, key_col...), which append
//     window_start and window_end: flow.Tumble, flow.Hop and
//     flow.Session (session.go). An aggregate grouping by the
//     window_start of TUMBLE or HOP, or the window_end of SESSION, over
//     a source's watermark column gets flow's WindowPolicy: the watermark closes its windows (state
//     freed, a change for a closed window dropped and counted), and
//     with Options.Emit EmitOnWindowClose (the view option emit =
//     'on_window_close') each window's rows are emitted once, when it
//     closes (emit.go: which columns are window starts is followed
//     through the plan, and why no record the source passed is
//     dropped).
//   - Interval joins (ON terms bounding one side's watermark column by
//     the other's times, exec.JoinBound) over inputs that only insert:
//     each side's rows expire by the watermark (flow.JoinExpiry,
//     expire.go); a SESSION over a watermark column frees closed
//     sessions. Such views drop late records (View.Windowed).
//   - WITH queries and subqueries in FROM: compiled once, a WITH query
//     read twice is one node read twice.
//   - Views over views: a relation of the Catalog may be another view;
//     its changes are an input like a source's.
//
// Refused with 0A000 (feature_not_supported), naming the construct:
// other subqueries in expressions (correlated scalar ones, NOT IN,
// correlation other than by equalities), other window functions and
// frames, joins without an equality between the sides (cross and
// non-equi joins, except with a constant relation), LIMIT without
// ORDER BY, aggregates flow does not keep retractably (array_agg,
// string_agg(DISTINCT), SUM/AVG DISTINCT, SUM of intervals, ...),
// other LATERAL subqueries, and non-deterministic functions (now(), random()): a view
// must be a deterministic function of its inputs. A scalar subquery
// with more than one row fails the epoch with 21000 at run time.
//
// ORDER BY without LIMIT is accepted and ignored, with a notice (View.
// Notices): a view's rows have no order (PostgreSQL's view keeps the
// ORDER BY for the SELECT that reads it; Materialize and RisingWave
// ignore it in a materialized view, as Strand does); a reader orders
// what it reads.
package viewplan
