package views

import (
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/viewplan"
)

// viewOptions are a view's compile options from its stored WITH
// options (emit).
func viewOptions(rel meta.Relation) (viewplan.Options, error) {
	var opts viewplan.Options
	if v, ok := rel.Option(viewplan.EmitOption); ok {
		e, err := viewplan.ParseEmit(v)
		if err != nil {
			return opts, err
		}
		opts.Emit = e
	}
	return opts, nil
}

// lateSeen turns the driver's running count of records its windowed
// aggregates dropped as late (flow.NodeStats.Late, since the driver was
// made) into the increments strand_sql_view_late_records_total counts.
type lateSeen struct{ n int64 }

func (l *lateSeen) delta(drv *flow.Driver) int64 {
	var n int64
	for _, s := range drv.Stats() {
		n += s.Late
	}
	d := n - l.n
	l.n = n
	return d
}
