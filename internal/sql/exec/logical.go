package exec

import (
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Logical is a read-only description of a planned query's operators,
// for a compiler that runs the same plan another way: package viewplan
// compiles it into an incremental dataflow, so names, types, aggregates
// and joins are resolved once, here, for both. Its expressions are the
// plan's own (over the node's input row) and must not be changed. A
// WITH query read twice is one *Logical reached by both paths.
type Logical struct {
	Op LogicalOp
	// In are the inputs: one, two for OpJoin and OpSetOp, any number
	// for OpConcat, none for OpScan and OpValues.
	In []*Logical
	// Relation is OpScan's, RelationName its name as the query wrote
	// it (schema-qualified if it was).
	Relation     Relation
	RelationName string
	// Rows are OpValues' rows of constant expressions.
	Rows [][]*expr.Expr
	// Exprs are OpProject's output columns and OpAggregate's group
	// keys, over the input row.
	Exprs []*expr.Expr
	// Pred is OpFilter's condition, and OpJoin's residual (the ON terms
	// that are not equalities, over the joined row; nil if none).
	Pred *expr.Expr
	// Aggs are OpAggregate's calls; its output row is the group keys
	// then each call's result.
	Aggs []LogicalAgg
	// OpJoin: the kind, the widths of the sides, and the equality keys:
	// EqLeft[i] over the joined row's left part equals EqRight[i] over
	// its right part (both of one type; a NULL matches nothing).
	Join                  JoinKind
	LeftWidth, RightWidth int
	EqLeft, EqRight       []*expr.Expr
	// Bounds are the residual's conjuncts that bound a timestamp of one
	// side by one of the other (an interval join's), also in Pred.
	Bounds []JoinBound
	// Sort are OpSort's keys, over its input's columns.
	Sort []LogicalSortKey
	// Limit and Offset are OpLimit's constant expressions (nil: none).
	Limit, Offset *expr.Expr
	// OpSetOp: INTERSECT (else EXCEPT), and ALL.
	Intersect, All bool
}

// LogicalOp is a Logical node's operator.
type LogicalOp uint8

const (
	OpScan      LogicalOp = iota // a relation's rows
	OpValues                     // constant rows (VALUES, FROM-less SELECT)
	OpFilter                     // rows where Pred is true
	OpProject                    // Exprs over each row
	OpAggregate                  // GROUP BY Exprs with Aggs
	OpJoin                       // Join of In[0] and In[1]
	OpDistinct                   // one of each distinct row
	OpSort                       // ORDER BY Sort
	OpLimit                      // LIMIT/OFFSET
	OpConcat                     // UNION ALL of In
	OpSetOp                      // INTERSECT or EXCEPT
)

// JoinKind is which unmatched rows a join keeps.
type JoinKind uint8

const (
	JoinInner JoinKind = iota
	JoinLeft
	JoinRight
	JoinFull
)

// LogicalAgg is one aggregate call: its function's name (count, sum,
// avg, min, max, bool_and, bool_or, string_agg, ...), COUNT(*), its
// argument expressions over the aggregation's input row, DISTINCT,
// FILTER (nil if none), ORDER BY inside the call, and its result type.
type LogicalAgg struct {
	Name     string
	Star     bool
	Args     []*expr.Expr
	Distinct bool
	Filter   *expr.Expr
	Ordered  bool
	// Order are the ORDER BY keys inside the call, over the
	// aggregation's input row (Ordered is len(Order) > 0).
	Order []LogicalAggOrder
	Type  types.Type
}

// LogicalAggOrder is an ORDER BY term inside an aggregate call.
type LogicalAggOrder struct {
	Expr       *expr.Expr
	Desc       bool
	NullsFirst bool
}

// LogicalSortKey is an ORDER BY term over a column of the input.
type LogicalSortKey struct {
	Col        int
	Desc       bool
	NullsFirst bool
}

// Logical returns the query's plan as a Logical tree.
func (q *Query) Logical() *Logical {
	return logicalOf(q.root, map[node]*Logical{})
}

func logicalOf(n node, seen map[node]*Logical) *Logical {
	if l, ok := seen[n]; ok {
		return l
	}
	var l *Logical
	sub := func(in node) *Logical { return logicalOf(in, seen) }
	switch x := n.(type) {
	case *materialNode:
		l = sub(x.in)
	case *scanNode:
		l = &Logical{Op: OpScan, Relation: x.rel, RelationName: x.name}
	case *rowsNode:
		l = &Logical{Op: OpValues, Rows: x.rows}
	case *filterNode:
		l = &Logical{Op: OpFilter, In: []*Logical{sub(x.in)}, Pred: x.cond}
	case *projectNode:
		l = &Logical{Op: OpProject, In: []*Logical{sub(x.in)}, Exprs: x.exprs}
	case *aggNode:
		l = &Logical{Op: OpAggregate, In: []*Logical{sub(x.in)}, Exprs: x.groups}
		for _, a := range x.aggs {
			la := LogicalAgg{Name: a.name, Star: a.star, Args: a.args, Distinct: a.distinct,
				Filter: a.filter, Ordered: len(a.order) > 0, Type: a.typ}
			for i, e := range a.order {
				la.Order = append(la.Order, LogicalAggOrder{Expr: e, Desc: a.keys[i].desc, NullsFirst: a.keys[i].nullsFirst})
			}
			l.Aggs = append(l.Aggs, la)
		}
	case *joinNode:
		l = &Logical{Op: OpJoin, In: []*Logical{sub(x.left), sub(x.right)}, Join: JoinKind(x.kind),
			LeftWidth: x.lw, RightWidth: x.rw, EqLeft: x.eqL, EqRight: x.eqR, Pred: x.residual, Bounds: x.bounds}
	case *distinctNode:
		l = &Logical{Op: OpDistinct, In: []*Logical{sub(x.in)}}
	case *sortNode:
		l = &Logical{Op: OpSort, In: []*Logical{sub(x.in)}}
		for _, k := range x.keys {
			l.Sort = append(l.Sort, LogicalSortKey{Col: k.col, Desc: k.desc, NullsFirst: k.nullsFirst})
		}
	case *limitNode:
		l = &Logical{Op: OpLimit, In: []*Logical{sub(x.in)}, Limit: x.limit, Offset: x.offset}
	case *concatNode:
		l = &Logical{Op: OpConcat}
		for _, p := range x.parts {
			l.In = append(l.In, sub(p))
		}
	case *setOpNode:
		l = &Logical{Op: OpSetOp, In: []*Logical{sub(x.left), sub(x.right)}, Intersect: x.intersect, All: x.all}
	default:
		panic("exec: Logical: unknown plan node")
	}
	seen[n] = l
	return l
}

// Walk calls fn for n and, while fn returns true, for each node below
// it, in the order the tree holds them.
func Walk(n *pg.Node, fn func(*pg.Node) bool) { walk(n, fn) }
