package views

import (
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
)

// Explain prints the dataflow of the materialized view with relation
// id (EXPLAIN): compiled from the catalog as its task compiles it
// (views it reads inlined), one line per operator (viewplan.View.
// Explain), with each operator's changes in and out since the task
// started when the view runs on this agent.
func (r *Runner) Explain(id uint64) ([]string, error) {
	v := r.cfg.Store.View()
	rels, err := v.Relations()
	v.Close()
	if err != nil {
		return nil, err
	}
	var rel meta.Relation
	found := false
	for _, x := range rels {
		if x.ID == id {
			rel, found = x, true
		}
	}
	if !found || rel.Kind != meta.RelationView {
		return nil, sqlerr.Errorf(sqlerr.UndefinedTable, "materialized view %d does not exist", id)
	}
	vw, defs, err := compile(rel, rels)
	if err != nil {
		return nil, err
	}
	cols := map[string][]string{}
	for _, d := range defs {
		for _, c := range d.Columns {
			cols[d.Name] = append(cols[d.Name], c.Name)
		}
	}
	return vw.Explain(rel.Name, r.nodeStats(id), func(name string) []string { return cols[name] }), nil
}

// nodeStats are the running task's operator counters, nil if the view
// does not run here. The driver changes them only in Step, which runs
// under commitMu.
func (r *Runner) nodeStats(id uint64) []flow.NodeStats {
	r.mu.Lock()
	t, ok := r.mu.tasks[id]
	r.mu.Unlock()
	if !ok {
		return nil
	}
	t.commitMu.Lock()
	defer t.commitMu.Unlock()
	t.mu.Lock()
	drv := t.mu.drv
	t.mu.Unlock()
	if drv == nil {
		return nil
	}
	return drv.Stats()
}
