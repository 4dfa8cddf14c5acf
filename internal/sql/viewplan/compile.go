package viewplan

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/parse"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Relation is an input a view may read: a source, or another view
// (whose output is a relation for the next).
type Relation struct {
	// Name is the relation's name as the graph's input is named.
	Name    string
	Columns []exec.Column
	// Watermark says the relation (a source) has a watermark, on
	// column EventTime: windows over that column close by it.
	Watermark bool
	EventTime int
}

// Catalog finds the relations a view reads; ok false if there is none.
type Catalog interface {
	Relation(schema, name string) (*Relation, bool, error)
}

// View is a compiled view: its columns, the key its contents are
// indexed by, the relations it reads, and the dataflow Graph builds.
type View struct {
	Columns []exec.Column
	// Index is the key the contents are kept by (flow.Options.Index):
	// the group key of a GROUP BY on top, all columns after DISTINCT,
	// else the whole row.
	Index flow.IndexSpec
	// Inputs are the relations read, in the order of the graph's
	// inputs (flow.Epoch.Inputs).
	Inputs []string
	// Notices are what PostgreSQL would send as NOTICEs: parts of the
	// query accepted and ignored (an ORDER BY without LIMIT).
	Notices []string
	// Windowed: an aggregate of the view closes windows by the
	// watermark (emit.go), or a join frees its rows by it (joinExpiry),
	// so its runner drops the records the source finds late: what the
	// view forgot could have changed by them.
	Windowed bool
	nodes    []recNode
	output   flow.Node
}

// recNode is one node of the compiled graph, replayed by Graph.
type recNode struct {
	name string
	op   flow.Operator // nil for an input
	ins  []flow.Node
}

// Graph builds the view's dataflow. Each call builds the same graph,
// node for node, so a driver reopened over the view's store finds its
// state. The operators are shared between the graphs: they hold only
// their settings.
func (v *View) Graph() *flow.Graph {
	g := new(flow.Graph)
	for _, n := range v.nodes {
		if n.op == nil {
			g.Input(n.name)
		} else {
			g.Add(n.name, n.op, n.ins...)
		}
	}
	g.SetOutput(v.output)
	return g
}

// Compile compiles a view's query, given as SQL: a SELECT, or CREATE
// MATERIALIZED VIEW ... AS SELECT.
func Compile(sql string, cat Catalog) (*View, error) {
	st, err := ParseSelect(sql)
	if err != nil {
		return nil, err
	}
	return CompileSelect(st, cat)
}

// ParseSelect parses a view's query, given as SQL (a SELECT, or CREATE
// MATERIALIZED VIEW ... AS SELECT), into its SELECT.
func ParseSelect(sql string) (*pg.SelectStmt, error) {
	stmts, err := parse.Parse(sql)
	if err != nil {
		return nil, err
	}
	if len(stmts) != 1 {
		return nil, sqlerr.Errorf(sqlerr.SyntaxError, "a view is one statement, not %d", len(stmts))
	}
	n := stmts[0].Node
	if ctas := n.GetCreateTableAsStmt(); ctas != nil {
		n = ctas.Query
	}
	st := n.GetSelectStmt()
	if st == nil {
		return nil, sqlerr.Errorf(sqlerr.SyntaxError, "a view's query must be a SELECT")
	}
	return st, nil
}

// CompileSelect compiles a view's SELECT. It rewrites st in place (its
// streaming forms into relations of the compiler's own): pass a copy
// to keep it.
func CompileSelect(st *pg.SelectStmt, cat Catalog) (*View, error) {
	return CompileSelectWith(st, cat, Options{})
}

// CompileSelectWith is CompileSelect with the view's options.
func CompileSelectWith(st *pg.SelectStmt, cat Catalog, opts Options) (*View, error) {
	c := &compiler{cat: cat, env: &expr.Env{Ctx: context.Background()}, inputs: map[string]flow.Node{},
		derived: map[string]*derived{}, memo: map[*exec.Logical]built{}, opts: opts, rels: map[string]*Relation{}}
	l, cols, err := c.planSelect(st)
	if err != nil {
		return nil, err
	}
	b, err := c.translate(l)
	if err != nil {
		return nil, err
	}
	b = c.materialize(b)
	if err := c.checkEmit(b); err != nil {
		return nil, err
	}
	v := &View{Columns: cols, Inputs: c.inputNames, Notices: c.notices, nodes: c.nodes, output: b.node, Windowed: c.windowed+c.expiring > 0}
	if b.key != nil {
		v.Index = flow.IndexSpec{KeyCols: b.key, Unique: b.unique}
	}
	// The graph must be one flow runs: check it now, not at the first
	// epoch.
	if _, err := flow.NewDriver(v.Graph(), flow.NewMemStore(), flow.Options{Index: &v.Index}); err != nil {
		return nil, sqlerr.Errorf(sqlerr.InternalError, "viewplan: %v", err)
	}
	return v, nil
}

// compiler compiles one view.
type compiler struct {
	cat Catalog
	// env evaluates expressions: a view's have no parameters and no
	// statement time (now() is refused).
	env        *expr.Env
	nodes      []recNode
	inputs     map[string]flow.Node
	inputNames []string
	derived    map[string]*derived
	// frames are the WITH queries in scope, innermost last: name ->
	// derived relation name.
	frames  []map[string]string
	memo    map[*exec.Logical]built
	notices []string
	semis   int // semi- and anti-joins made, for their names
	opts    Options
	// rels are the Catalog's relations read, by name; windowed counts
	// the aggregates given a WindowPolicy.
	rels     map[string]*Relation
	windowed int
	// expiring counts joins that free their rows by the watermark.
	expiring int
}

// derivedPrefix names the relations the compiler makes of WITH
// queries, top-N subqueries and table functions. exec's planner finds
// them by these names; a space keeps them from any name a user writes
// unquoted.
const derivedPrefix = "strand derived "

// derived is a relation the compiler made: its columns for exec's
// planner, and how it compiles into the graph (once, on first use).
type derived struct {
	name string
	cols []exec.Column
	// consts are a constant relation's rows (generate_series), which a
	// join repeats each row by instead of a node.
	consts []types.Row
	// scalar marks a scalar subquery's relation (scalar.go).
	scalar bool
	emit   func() (built, error)
	done   *built
}

func (c *compiler) newDerived(cols []exec.Column, emit func() (built, error)) *derived {
	d := &derived{name: fmt.Sprintf("%s%d", derivedPrefix, len(c.derived)+1), cols: cols, emit: emit}
	c.derived[d.name] = d
	return d
}

func (d *derived) Columns() []exec.Column { return d.cols }
func (d *derived) Scan(context.Context) (exec.RowIter, error) {
	return nil, sqlerr.Errorf(sqlerr.InternalError, "viewplan: a view's relation is not scanned")
}

// input is a relation of the Catalog as exec's planner sees it.
type input struct{ rel *Relation }

func (i input) Columns() []exec.Column { return i.rel.Columns }
func (i input) Scan(context.Context) (exec.RowIter, error) {
	return nil, sqlerr.Errorf(sqlerr.InternalError, "viewplan: a view's input is not scanned")
}

// execCatalog is what exec's planner reads: the derived relations, then
// the Catalog's.
type execCatalog struct{ c *compiler }

func (e execCatalog) Relation(schema, name string) (exec.Relation, bool, error) {
	if schema == "" {
		if d, ok := e.c.derived[name]; ok {
			return d, true, nil
		}
	}
	r, ok, err := e.c.cat.Relation(schema, name)
	if err != nil || !ok {
		return nil, ok, err
	}
	e.c.rels[r.Name] = r
	return input{r}, true, nil
}

// planSelect rewrites st's streaming forms, refuses what a view cannot
// be, and plans it with exec's planner.
func (c *compiler) planSelect(st *pg.SelectStmt) (*exec.Logical, []exec.Column, error) {
	sn := &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: st}}
	exec.Walk(sn, func(x *pg.Node) bool {
		if tc := x.GetTypeCast(); tc != nil {
			intervalField(tc)
		}
		return true
	})
	if err := c.rewrite(st); err != nil {
		return nil, nil, err
	}
	if err := check(sn); err != nil {
		return nil, nil, err
	}
	q, err := exec.Plan(execCatalog{c}, st, nil, exec.Options{})
	if err != nil {
		return nil, nil, err
	}
	return q.Logical(), q.Columns(), nil
}

// intervalUnits are the interval field qualifiers a number may carry
// (PostgreSQL's INTERVAL_MASK bits).
var intervalUnits = map[int32]string{1 << 3: "day", 1 << 10: "hour", 1 << 11: "minute", 1 << 12: "second"}

// intervalField rewrites INTERVAL '10' SECOND, as streaming SQL writes
// window sizes, into INTERVAL '10 second', which PostgreSQL reads it
// as (a bare number takes the qualifier's unit) and expr compiles
// (it takes no interval qualifiers). Other casts are left alone.
func intervalField(tc *pg.TypeCast) {
	tn := tc.TypeName
	if tn == nil || len(tn.Typmods) != 1 || len(tn.Names) == 0 || tn.Names[len(tn.Names)-1].GetString_().GetSval() != "interval" {
		return
	}
	k := tc.Arg.GetAConst()
	m := tn.Typmods[0].GetAConst()
	if k == nil || k.GetSval() == nil || m == nil || m.GetIval() == nil {
		return
	}
	unit, ok := intervalUnits[m.GetIval().Ival]
	s := strings.TrimSpace(k.GetSval().Sval)
	if _, err := strconv.ParseFloat(s, 64); !ok || err != nil {
		return
	}
	k.GetSval().Sval = s + " " + unit
	tn.Typmods = nil
}

// nondeterministic are functions whose value is not a function of the
// row: a view over them could not be rebuilt from its inputs.
var nondeterministic = map[string]bool{
	"now": true, "random": true, "clock_timestamp": true, "statement_timestamp": true,
	"transaction_timestamp": true, "timeofday": true, "pg_sleep": true, "gen_random_uuid": true,
	"setseed": true, "current_setting": true,
}

// keptAggregates names the aggregates a view keeps, for refusals.
const keptAggregates = "count, sum, avg, min, max, bool_and, bool_or, string_agg and the variance family"

// unkeptAggregates are PostgreSQL's aggregates that flow does not keep
// retractably, refused by name before exec plans the query (exec
// answers 0A000 for most of them itself; a view needs what flow can
// retract, and says so).
var unkeptAggregates = map[string]bool{
	"array_agg": true, "json_agg": true, "jsonb_agg": true, "json_object_agg": true, "jsonb_object_agg": true,
	"percentile_cont": true, "percentile_disc": true, "mode": true, "corr": true, "covar_pop": true, "covar_samp": true,
	"regr_slope": true, "regr_intercept": true, "regr_count": true, "regr_r2": true, "regr_avgx": true, "regr_avgy": true,
	"regr_sxx": true, "regr_syy": true, "regr_sxy": true, "bit_and": true, "bit_or": true, "bit_xor": true, "xmlagg": true,
	"any_value": true, "range_agg": true, "range_intersect_agg": true,
}

// check refuses what is left after rewrite that a view cannot compute.
func check(n *pg.Node) error {
	var err error
	exec.Walk(n, func(x *pg.Node) bool {
		if err != nil {
			return false
		}
		switch y := x.Node.(type) {
		case *pg.Node_SubLink:
			what := map[pg.SubLinkType]string{
				pg.SubLinkType_EXISTS_SUBLINK: "EXISTS (subquery)",
				pg.SubLinkType_ANY_SUBLINK:    "IN/ANY (subquery)",
				pg.SubLinkType_ALL_SUBLINK:    "ALL (subquery)",
				pg.SubLinkType_EXPR_SUBLINK:   "a scalar subquery",
			}[y.SubLink.SubLinkType]
			if what == "" {
				what = "a subquery in an expression"
			}
			err = sqlerr.NotSupported("%s is not supported in a materialized view: write it as a join", what).At(y.SubLink.Location)
		case *pg.Node_FuncCall:
			name := funcName(y.FuncCall)
			if y.FuncCall.Over != nil {
				err = sqlerr.NotSupported("window function %s is not supported in a materialized view: only ROW_NUMBER() in a subquery bounded by the WHERE over it (top-N), and count, sum, avg, min and max over ROWS BETWEEN n PRECEDING AND CURRENT ROW", name).At(y.FuncCall.Location)
			} else if unkeptAggregates[name] {
				err = sqlerr.NotSupported("aggregate %s is not supported in a materialized view (%s are)", name, keptAggregates).At(y.FuncCall.Location)
			} else if nondeterministic[name] {
				err = sqlerr.NotSupported("%s() is not supported in a materialized view: a view is a deterministic function of its inputs", name).At(y.FuncCall.Location)
			}
		case *pg.Node_SqlvalueFunction:
			err = sqlerr.NotSupported("the current time or user is not supported in a materialized view: a view is a deterministic function of its inputs").At(y.SqlvalueFunction.Location)
		case *pg.Node_ParamRef:
			err = sqlerr.NotSupported("parameters are not supported in a materialized view").At(y.ParamRef.Location)
		}
		return err == nil
	})
	return err
}

func funcName(f *pg.FuncCall) string {
	return strings.ToLower(f.Funcname[len(f.Funcname)-1].GetString_().GetSval())
}

// rewrite turns st's WITH queries, top-N subqueries and table functions
// into derived relations, and a FROM list into joins on the WHERE's
// equalities between its items, recursively.
func (c *compiler) rewrite(st *pg.SelectStmt) error {
	if st.WithClause != nil {
		if st.WithClause.Recursive {
			return sqlerr.NotSupported("WITH RECURSIVE is not supported in a materialized view")
		}
		frame := map[string]string{}
		c.frames = append(c.frames, frame)
		defer func() { c.frames = c.frames[:len(c.frames)-1] }()
		for _, cn := range st.WithClause.Ctes {
			cte := cn.GetCommonTableExpr()
			q := cte.Ctequery.GetSelectStmt()
			if q == nil {
				return sqlerr.NotSupported("WITH %s: only SELECT is supported in WITH", cte.Ctename)
			}
			if _, dup := frame[cte.Ctename]; dup {
				return sqlerr.Errorf(sqlerr.DuplicateAlias, "WITH query name %q specified more than once", cte.Ctename).At(cte.Location)
			}
			l, cols, err := c.planSelect(q)
			if err != nil {
				return err
			}
			if len(cte.Aliascolnames) > len(cols) {
				return sqlerr.Errorf(sqlerr.InvalidColumnReference, "WITH query %q has %d columns available but %d columns specified", cte.Ctename, len(cols), len(cte.Aliascolnames))
			}
			cols = append([]exec.Column(nil), cols...)
			for i, a := range cte.Aliascolnames {
				cols[i].Name = a.GetString_().GetSval()
			}
			d := c.newDerived(cols, func() (built, error) { return c.translate(l) })
			frame[cte.Ctename] = d.name
		}
		st.WithClause = nil
	}
	if st.Larg != nil || st.Rarg != nil {
		if err := c.rewrite(st.Larg); err != nil {
			return err
		}
		return c.rewrite(st.Rarg)
	}
	if err := c.laterals(st); err != nil {
		return err
	}
	for i, item := range st.FromClause {
		n, err := c.topN(st, item)
		if err != nil {
			return err
		}
		if n == nil {
			if n, err = c.rewriteFrom(item); err != nil {
				return err
			}
		}
		st.FromClause[i] = n
	}
	var anti []antiJoin
	if st.WhereClause != nil && len(st.FromClause) > 0 {
		var err error
		if anti, err = c.decorrelate(st); err != nil {
			return err
		}
	}
	if len(st.FromClause) > 1 {
		c.joinList(st)
	}
	if len(anti) > 0 {
		applyAnti(st, anti)
	}
	if err := c.scalars(st); err != nil {
		return err
	}
	return c.rowsWindow(st)
}

// rewriteFrom rewrites one FROM item.
func (c *compiler) rewriteFrom(item *pg.Node) (*pg.Node, error) {
	switch x := item.Node.(type) {
	case *pg.Node_RangeVar:
		rv := x.RangeVar
		if rv.Schemaname != "" {
			return item, nil
		}
		for i := len(c.frames) - 1; i >= 0; i-- {
			if name, ok := c.frames[i][rv.Relname]; ok {
				if rv.Alias == nil {
					rv.Alias = &pg.Alias{Aliasname: rv.Relname}
				}
				rv.Relname = name
				return item, nil
			}
		}
	case *pg.Node_RangeSubselect:
		if q := x.RangeSubselect.Subquery.GetSelectStmt(); q != nil && !x.RangeSubselect.Lateral {
			if err := c.rewrite(q); err != nil {
				return nil, err
			}
		}
	case *pg.Node_JoinExpr:
		var err error
		if x.JoinExpr.Larg, err = c.rewriteFrom(x.JoinExpr.Larg); err != nil {
			return nil, err
		}
		if x.JoinExpr.Rarg, err = c.rewriteFrom(x.JoinExpr.Rarg); err != nil {
			return nil, err
		}
	case *pg.Node_RangeFunction:
		return c.tableFunction(x.RangeFunction)
	}
	return item, nil
}

// joinList turns FROM a, b, c WHERE ... into a JOIN b ON ... JOIN c ON
// ..., each join's ON the WHERE's terms over its two sides (so that its
// equalities become the join's keys), the other terms left in WHERE.
// A term whose names it cannot place stays in WHERE.
func (c *compiler) joinList(st *pg.SelectStmt) {
	items := st.FromClause
	var terms []*pg.Node
	if st.WhereClause != nil {
		terms = conjuncts(st.WhereClause)
	}
	refs := make([][]int, len(terms))
	for i, t := range terms {
		refs[i] = c.itemsOf(t, items)
	}
	used := make([]bool, len(terms))
	cur := items[0]
	for i := 1; i < len(items); i++ {
		var on []*pg.Node
		for k, t := range terms {
			if used[k] || refs[k] == nil || len(refs[k]) < 2 {
				continue
			}
			within, hasI := true, false
			for _, r := range refs[k] {
				within = within && r <= i
				hasI = hasI || r == i
			}
			if within && hasI {
				on = append(on, t)
				used[k] = true
			}
		}
		cur = &pg.Node{Node: &pg.Node_JoinExpr{JoinExpr: &pg.JoinExpr{Jointype: pg.JoinType_JOIN_INNER, Larg: cur, Rarg: items[i], Quals: and(on)}}}
	}
	var rest []*pg.Node
	for k, t := range terms {
		if !used[k] {
			rest = append(rest, t)
		}
	}
	st.FromClause = []*pg.Node{cur}
	st.WhereClause = and(rest)
}

func and(terms []*pg.Node) *pg.Node {
	switch len(terms) {
	case 0:
		return nil
	case 1:
		return terms[0]
	}
	return pg.MakeBoolExprNode(pg.BoolExprType_AND_EXPR, terms, -1)
}

func conjuncts(n *pg.Node) []*pg.Node {
	if b := n.GetBoolExpr(); b != nil && b.Boolop == pg.BoolExprType_AND_EXPR {
		var out []*pg.Node
		for _, a := range b.Args {
			out = append(out, conjuncts(a)...)
		}
		return out
	}
	return []*pg.Node{n}
}

// itemsOf returns the FROM items (indexes, ascending, distinct) term's
// column references name, or nil if one cannot be placed (or term has
// a subquery).
func (c *compiler) itemsOf(term *pg.Node, items []*pg.Node) []int {
	var out []int
	ok := true
	add := func(i int) {
		for _, j := range out {
			if j == i {
				return
			}
		}
		out = append(out, i)
	}
	exec.Walk(term, func(x *pg.Node) bool {
		if !ok {
			return false
		}
		if x.GetSubLink() != nil {
			ok = false
			return false
		}
		cr := x.GetColumnRef()
		if cr == nil {
			return true
		}
		var names []string
		for _, f := range cr.Fields {
			names = append(names, f.GetString_().GetSval())
		}
		found := -1
		for i, it := range items {
			if c.itemHas(it, names) {
				if found >= 0 {
					ok = false // ambiguous: leave it to the planner
					return false
				}
				found = i
			}
		}
		if found < 0 {
			ok = false
			return false
		}
		add(found)
		return true
	})
	if !ok {
		return nil
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// itemHas reports whether a FROM item answers to the column reference
// names: table.column by the item's alias, column by the columns of a
// relation it names.
func (c *compiler) itemHas(item *pg.Node, names []string) bool {
	switch x := item.Node.(type) {
	case *pg.Node_RangeVar:
		rv := x.RangeVar
		alias := rv.Relname
		if rv.Alias != nil {
			alias = rv.Alias.Aliasname
		}
		switch len(names) {
		case 2:
			return names[0] == alias
		case 1:
			if rv.Alias != nil && len(rv.Alias.Colnames) > 0 {
				return false // renamed columns: leave it to the planner
			}
			rel, ok, err := execCatalog{c}.Relation(rv.Schemaname, rv.Relname)
			if err != nil || !ok {
				return false
			}
			for _, col := range rel.Columns() {
				if col.Name == names[0] {
					return true
				}
			}
		}
	case *pg.Node_RangeSubselect:
		return len(names) == 2 && x.RangeSubselect.Alias != nil && names[0] == x.RangeSubselect.Alias.Aliasname
	case *pg.Node_JoinExpr:
		if x.JoinExpr.Alias != nil {
			return len(names) == 2 && names[0] == x.JoinExpr.Alias.Aliasname
		}
		return c.itemHas(x.JoinExpr.Larg, names) || c.itemHas(x.JoinExpr.Rarg, names)
	}
	return false
}
