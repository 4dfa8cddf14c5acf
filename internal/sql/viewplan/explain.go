package viewplan

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/strandkafka/strand/internal/sql/flow"
)

// maxExplainLines bounds Explain's output: a WITH query read by many
// paths is printed under each, so a DAG could print far more lines
// than it has nodes.
const maxExplainLines = 1000

// Explain prints the view's dataflow as PostgreSQL prints a plan: one
// line per operator, the output at the top, each operator's inputs
// below it after "->", indented by depth. Columns are numbered from 1
// (#n) in each operator's input row, since operators see positions,
// not names; the view's own column names head the output. stats, if
// given (flow.Driver.Stats of a running view, in node order), adds
// each operator's changes in and out (and changes dropped as late)
// since its task started. inputCols, if not nil, names an input's
// columns, so its #n can be read off.
func (v *View) Explain(name string, stats []flow.NodeStats, inputCols func(input string) []string) []string {
	cols := make([]string, len(v.Columns))
	for i, c := range v.Columns {
		cols[i] = c.Name
	}
	out := []string{"Materialized View " + name, "  Output: " + strings.Join(cols, ", ")}
	key := "the whole row"
	if len(v.Index.KeyCols) > 0 {
		var ks []string
		for _, k := range v.Index.KeyCols {
			if k >= 0 && k < len(cols) {
				ks = append(ks, cols[k])
			} else {
				ks = append(ks, col(k))
			}
		}
		key = strings.Join(ks, ", ")
		if v.Index.Unique {
			key += " (unique)"
		}
	}
	out = append(out, "  Index: "+key)
	var walk func(n flow.Node, depth int)
	walk = func(n flow.Node, depth int) {
		if len(out) >= maxExplainLines {
			return
		}
		if int(n) < 0 || int(n) >= len(v.nodes) {
			return
		}
		rn := v.nodes[n]
		line := strings.Repeat(" ", 6*depth-4) + "->  " + describe(rn)
		if rn.op == nil && inputCols != nil {
			if cs := inputCols(rn.name); len(cs) > 0 {
				line += " (" + strings.Join(cs, ", ") + ")"
			}
		}
		if int(n) < len(stats) {
			s := stats[n]
			line += fmt.Sprintf("  (changes in=%d out=%d", s.In, s.Out)
			if s.Late > 0 {
				line += fmt.Sprintf(" late=%d", s.Late)
			}
			if s.Freed > 0 {
				line += fmt.Sprintf(" freed=%d", s.Freed)
			}
			line += ")"
		}
		out = append(out, line)
		for _, in := range rn.ins {
			walk(in, depth+1)
		}
	}
	walk(v.output, 1)
	if len(out) >= maxExplainLines {
		out = append(out[:maxExplainLines], "  ... (cut at 1000 lines)")
	}
	return out
}

// describe is one operator's line: its kind and settings.
func describe(n recNode) string {
	switch op := n.op.(type) {
	case nil:
		return "Source " + n.name
	case *flow.Filter:
		return "Filter"
	case *flow.Map:
		if len(op.Exprs) == 1 {
			return "Map (computes 1 column)"
		}
		return fmt.Sprintf("Map (computes %d columns)", len(op.Exprs))
	case *flow.Project:
		return "Project " + cols(op.Cols)
	case *flow.Union:
		return fmt.Sprintf("Union All (%d inputs)", op.Inputs)
	case *flow.Tumble:
		s := fmt.Sprintf("Tumble (time %s, size %s", col(op.TimeCol), op.Size)
		if op.Offset != 0 {
			s += ", offset " + op.Offset.String()
		}
		return s + ")"
	case *flow.Hop:
		return fmt.Sprintf("Hop (time %s, slide %s, size %s)", col(op.TimeCol), op.Slide, op.Size)
	case *flow.Distinct:
		return "Distinct"
	case *flow.Aggregate:
		var calls []string
		for _, a := range op.Aggs {
			calls = append(calls, aggName(a))
		}
		s := "Aggregate"
		if len(op.GroupBy) > 0 {
			s = "Group Aggregate (group by " + strings.Join(colNames(op.GroupBy), ", ") + ";"
		} else {
			s += " (global;"
		}
		s += " " + strings.Join(calls, ", ")
		if w := op.Window; w != nil {
			s += fmt.Sprintf("; window %s, lateness %s", w.Size, w.Lateness)
			if w.EmitOnClose {
				s += ", emit on close"
			}
		}
		return s + ")"
	case *flow.Join:
		var on []string
		for i := range op.LeftKey {
			on = append(on, col(op.LeftKey[i])+" = right."+col(op.RightKey[i]))
		}
		return fmt.Sprintf("%s Join (on %s; widths %d, %d%s)", joinKind(op.Kind), strings.Join(on, " AND "), op.LeftWidth, op.RightWidth, expiry(op.Expire))
	case *flow.ResidualJoin:
		var on []string
		for i := range op.LeftKey {
			on = append(on, col(op.LeftKey[i])+" = right."+col(op.RightKey[i]))
		}
		return fmt.Sprintf("%s Join (on %s and more; widths %d, %d%s)", joinKind(op.Kind), strings.Join(on, " AND "), op.LeftWidth, op.RightWidth, expiry(op.Expire))
	case *flow.TopN:
		var keys []string
		for _, k := range op.OrderBy {
			s := col(k.Col)
			if k.Desc {
				s += " DESC"
			}
			switch k.Nulls {
			case flow.NullsFirst:
				s += " NULLS FIRST"
			case flow.NullsLast:
				s += " NULLS LAST"
			}
			keys = append(keys, s)
		}
		s := "Top-N ("
		if len(op.PartitionBy) > 0 {
			s += "partition by " + strings.Join(colNames(op.PartitionBy), ", ") + "; "
		}
		s += "order by " + strings.Join(keys, ", ") + fmt.Sprintf("; limit %d", op.Limit)
		if op.Offset > 0 {
			s += fmt.Sprintf(" offset %d", op.Offset)
		}
		if op.RowNumber {
			s += "; row_number"
		}
		return s + ")"
	case *constRows:
		return fmt.Sprintf("Constant (%d rows)", len(op.rows))
	case *crossRows:
		return fmt.Sprintf("Cross Join with Constant (%d rows)", len(op.rows))
	}
	return n.name
}

func col(i int) string { return "#" + strconv.Itoa(i+1) }

// expiry describes a join's rows freed by the watermark: each side's
// expiry, the least of its terms.
func expiry(e [2][]flow.JoinExpiry) string {
	s := ""
	for side, name := range []string{"left", "right"} {
		if len(e[side]) == 0 {
			continue
		}
		var ts []string
		for _, x := range e[side] {
			ts = append(ts, fmt.Sprintf("%s + %s", col(x.Col), x.Offset))
		}
		s += fmt.Sprintf("; %s rows expire at %s", name, strings.Join(ts, ", "))
	}
	return s
}

func colNames(cs []int) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = col(c)
	}
	return out
}

func cols(cs []int) string { return "(" + strings.Join(colNames(cs), ", ") + ")" }

func aggName(a flow.AggCall) string {
	switch a.Kind {
	case flow.CountStar:
		return "count(*)"
	case flow.Count:
		return "count(" + col(a.Col) + ")"
	case flow.Sum:
		return "sum(" + col(a.Col) + ")"
	case flow.Avg:
		return "avg(" + col(a.Col) + ")"
	case flow.Min:
		return "min(" + col(a.Col) + ")"
	case flow.Max:
		return "max(" + col(a.Col) + ")"
	case flow.CountDistinct:
		return "count(DISTINCT " + col(a.Col) + ")"
	case flow.BoolAnd:
		return "bool_and(" + col(a.Col) + ")"
	case flow.BoolOr:
		return "bool_or(" + col(a.Col) + ")"
	}
	return fmt.Sprintf("aggregate %d(%s)", a.Kind, col(a.Col))
}

func joinKind(k flow.JoinKind) string {
	switch k {
	case flow.LeftJoin:
		return "Left"
	case flow.RightJoin:
		return "Right"
	case flow.FullJoin:
		return "Full"
	}
	return "Inner"
}
