package views

import (
	"time"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/types"
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

// lateSeen counts the records a view whose windows close by the
// watermark dropped as late by their partition's watermark (the
// source's judgement, which the source marks and the view acts on).
// With the driver's own drops for closed windows (flow.NodeStats.Late;
// none for a window over an append source's watermark column, by the
// argument in viewplan's windowPolicy) they make
// strand_sql_view_late_dropped_total; strand_sql_view_late_records_total
// counts every late record the view read, dropped or not.
type lateSeen struct {
	dropped int64 // records dropped this run
}

// drop removes the records a reader marked late from cs
// (DropLate), counting them.
func (l *lateSeen) drop(cs []types.Change, late []int) []types.Change {
	l.dropped += int64(len(late))
	return DropLate(cs, late)
}

// DropLate removes the changes at the indexes late (ascending; a
// source.PartitionBatch's Late) from cs, in place: what a dataflow
// whose windows close by the watermark (viewplan.View.Windowed) must
// not see, so every copy of it, on any agent or after a restart, drops
// the same records. Only an append source's records are judged so
// (viewplan gives windows over upsert sources no watermark): a record
// is one +1 change, so dropping it leaves nothing unbalanced.
func DropLate(cs []types.Change, late []int) []types.Change {
	if len(late) == 0 {
		return cs
	}
	out := cs[:0]
	j := 0
	for i, c := range cs {
		if j < len(late) && late[j] == i {
			j++
			continue
		}
		out = append(out, c)
	}
	return out
}

// watermarkSeconds is a watermark as the gauge shows it: 0 for none.
func watermarkSeconds(wm time.Time) float64 {
	if wm.IsZero() {
		return 0
	}
	return float64(wm.UnixMicro()) / 1e6
}
