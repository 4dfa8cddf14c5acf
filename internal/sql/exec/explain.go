package exec

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/strandkafka/strand/internal/sql/expr"
)

// maxExplainLines bounds Explain: a WITH query read twice is printed
// under each reader.
const maxExplainLines = 1000

// Explain prints the query's plan as PostgreSQL's EXPLAIN prints one
// (without costs, which this planner does not estimate): one line per
// operator, the top first, inputs below after "->", indented by depth.
// Expressions are compiled code, not text: a column passed through is
// #n (numbered from 1 in the operator's input row), anything computed
// "expr". A join's keys are numbered in the joined row (the left
// input's columns, then the right's).
func (q *Query) Explain() []string {
	var out []string
	var walk func(l *Logical, depth int)
	walk = func(l *Logical, depth int) {
		if len(out) >= maxExplainLines {
			return
		}
		line := explainNode(l)
		if depth > 0 {
			line = strings.Repeat(" ", 6*depth-4) + "->  " + line
		}
		out = append(out, line)
		for _, in := range l.In {
			walk(in, depth+1)
		}
	}
	walk(q.Logical(), 0)
	if len(out) >= maxExplainLines {
		out = append(out[:maxExplainLines], "... (cut at 1000 lines)")
	}
	return out
}

func explainNode(l *Logical) string {
	switch l.Op {
	case OpScan:
		return "Seq Scan on " + l.RelationName
	case OpValues:
		return fmt.Sprintf("Values Scan (%d rows)", len(l.Rows))
	case OpFilter:
		return "Filter"
	case OpProject:
		return "Project (" + exprList(l.Exprs) + ")"
	case OpAggregate:
		var calls []string
		for _, a := range l.Aggs {
			arg := "*"
			if !a.Star {
				arg = exprList(a.Args)
				if a.Distinct {
					arg = "DISTINCT " + arg
				}
			}
			c := a.Name + "(" + arg + ")"
			if a.Filter != nil {
				c += " FILTER"
			}
			calls = append(calls, c)
		}
		if len(l.Exprs) == 0 {
			return "Aggregate (" + strings.Join(calls, ", ") + ")"
		}
		s := "HashAggregate (group by " + exprList(l.Exprs)
		if len(calls) > 0 {
			s += "; " + strings.Join(calls, ", ")
		}
		return s + ")"
	case OpJoin:
		kind := [...]string{JoinInner: "Inner", JoinLeft: "Left", JoinRight: "Right", JoinFull: "Full"}[l.Join]
		if len(l.EqLeft) == 0 {
			s := "Nested Loop (" + kind
			if l.Pred != nil {
				s += "; join filter"
			}
			return s + ")"
		}
		var on []string
		for i := range l.EqLeft {
			on = append(on, exprText(l.EqLeft[i])+" = "+exprText(l.EqRight[i]))
		}
		s := "Hash Join (" + kind + "; on " + strings.Join(on, " AND ")
		if l.Pred != nil {
			s += "; join filter"
		}
		return s + ")"
	case OpDistinct:
		return "Distinct"
	case OpSort:
		var keys []string
		for _, k := range l.Sort {
			s := "#" + strconv.Itoa(k.Col+1)
			if k.Desc {
				s += " DESC"
			}
			if k.NullsFirst != k.Desc {
				if k.NullsFirst {
					s += " NULLS FIRST"
				} else {
					s += " NULLS LAST"
				}
			}
			keys = append(keys, s)
		}
		return "Sort (" + strings.Join(keys, ", ") + ")"
	case OpLimit:
		return "Limit"
	case OpConcat:
		return "Append"
	case OpSetOp:
		s := "SetOp Except"
		if l.Intersect {
			s = "SetOp Intersect"
		}
		if l.All {
			s += " All"
		}
		return s
	}
	return fmt.Sprintf("operator %d", l.Op)
}

func exprText(e *expr.Expr) string {
	if i, ok := e.ColumnIndex(); ok {
		return "#" + strconv.Itoa(i+1)
	}
	if e.Const {
		return "const"
	}
	return "expr"
}

func exprList(es []*expr.Expr) string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = exprText(e)
	}
	return strings.Join(out, ", ")
}
