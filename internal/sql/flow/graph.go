package flow

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/strandkafka/strand/internal/sql/types"
)

// ErrNegative: a retraction of a row the state does not hold. Inputs
// must be consistent Z-sets over time (an upsert source retracts only
// what it inserted); the epoch that would go below zero is refused.
var ErrNegative = errors.New("retraction of a row not present")

// Operator is one node of a dataflow. Step is called once per epoch,
// in topological order, with the epoch's changes on each of its inputs
// (ins[i] for input i, possibly empty), and returns its output changes
// for the epoch. Its state lives in ctx.State only (a namespace of its
// own, written in the epoch's batch): an operator keeps nothing in
// memory between epochs, so a restarted driver continues from the
// store alone.
type Operator interface {
	// Arity is the number of inputs.
	Arity() int
	Step(ctx *Context, ins [][]types.Change) ([]types.Change, error)
}

// Context is what an operator's Step may use.
type Context struct {
	// State is the operator's namespace of the dataflow's store.
	State Store
	// Watermark is the event time below which the inputs promise no
	// more records, as of the epoch's end (the zero Time before any):
	// windows it passes close. It only grows.
	Watermark time.Time
	// InputWatermark is the watermark before the epoch: the epoch's
	// records are judged late against it, since they were read before
	// the promise the epoch's new watermark makes.
	InputWatermark time.Time
	// Late counts records an operator dropped as later than the
	// watermark allows (see WindowPolicy); the driver accumulates it
	// in NodeStats.
	Late int64
	// Freed counts state rows an operator forgot because the watermark
	// passed them (a join's expired rows, closed sessions' rows); the
	// driver accumulates it in NodeStats.
	Freed int64
	// First is set in the first epoch a dataflow ever runs (the store
	// was empty), for operators that emit without input (a global
	// aggregate's row over nothing).
	First bool
	// scratch is the operator's memory reused from epoch to epoch
	// (maps, buffers, slabs), never its state: an operator clears it
	// at each epoch's start. It is per driver, as the Context is.
	scratch any
}

// Node names a node of a Graph.
type Node int

type node struct {
	name string
	op   Operator // nil for an input
	ins  []Node
}

// Graph is a dataflow: inputs, operators over earlier nodes (so it is
// a DAG in the order built), one output. Node numbers are its state
// namespaces, so a graph must be built in the same order each time it
// is run over the same store.
type Graph struct {
	nodes  []node
	inputs []Node
	output Node
	hasOut bool
}

// maxNodes bounds a graph: node numbers are two bytes of every state key.
const maxNodes = 1 << 16

// Input adds an input: the changes of a source (or another view).
func (g *Graph) Input(name string) Node {
	g.nodes = append(g.nodes, node{name: name})
	n := Node(len(g.nodes) - 1)
	g.inputs = append(g.inputs, n)
	return n
}

// Add adds op over ins (as many as op.Arity(), each an existing node).
func (g *Graph) Add(name string, op Operator, ins ...Node) Node {
	g.nodes = append(g.nodes, node{name: name, op: op, ins: ins})
	return Node(len(g.nodes) - 1)
}

// SetOutput names the node whose changes are the view's.
func (g *Graph) SetOutput(n Node) { g.output, g.hasOut = n, true }

func (g *Graph) validate() error {
	if len(g.nodes) > maxNodes {
		return fmt.Errorf("flow: %d nodes, at most %d", len(g.nodes), maxNodes)
	}
	if !g.hasOut || int(g.output) < 0 || int(g.output) >= len(g.nodes) {
		return errors.New("flow: graph has no output")
	}
	for i, n := range g.nodes {
		if n.op == nil {
			continue
		}
		if v, ok := n.op.(validator); ok {
			if err := v.validate(); err != nil {
				return fmt.Errorf("flow: node %d (%s): %w", i, n.name, err)
			}
		}
		if len(n.ins) != n.op.Arity() {
			return fmt.Errorf("flow: node %d (%s) has %d inputs, its operator takes %d", i, n.name, len(n.ins), n.op.Arity())
		}
		for _, in := range n.ins {
			if in < 0 || int(in) >= i {
				return fmt.Errorf("flow: node %d (%s) reads node %d, not an earlier one", i, n.name, in)
			}
		}
	}
	return nil
}

// The store's top-level layout:
//
//	'm' 'e'              epoch number of the last commit, uvarint
//	'm' 'w'              watermark, unix microseconds, varint
//	'm' 'c'              the caller's checkpoint (e.g. input offsets)
//	'm' 'l'              StateLayout when the state was begun, uvarint
//	'n' node(2 bytes BE) the node's operator state (see each operator)
//	'v'                  the view's index (see Index)
var (
	metaEpoch      = []byte("me")
	metaWatermark  = []byte("mw")
	metaCheckpoint = []byte("mc")
	metaLayout     = []byte("ml")
	indexPrefix    = []byte("v")
)

// StateLayout numbers the layout of the operators' state: raised when
// a build keeps a graph's state differently from the builds before it
// (layout 2: joins and sessions index their rows by expiry, and an
// aggregate grouping by a SESSION's window_end keeps it first; layout
// 3: the planner filters a join's sides by WHERE's one-sided terms and
// keeps only the columns read above it, so a view's nodes and a join's
// rows differ, and a join keeps both sides' counts of a key in one
// value), so a state begun by an older build is not read as if
// it were this one's. State written before layouts were recorded is
// layout 1.
const StateLayout = 3

// ErrStaleLayout is NewDriver's answer for a state an older build began
// (another StateLayout): the caller discards it and builds the state
// again from the inputs, which gives what this build computes.
var ErrStaleLayout = errors.New("flow: the state was written in an older layout")

func nodePrefix(i int) []byte { return []byte{'n', byte(i >> 8), byte(i)} }

// Options tune a Driver.
type Options struct {
	// Index says how the view's contents are indexed (nil: by the whole
	// row, with a count).
	Index *IndexSpec
	// MaxEpochChanges bounds the input changes of one epoch
	// (DefaultMaxEpochChanges if 0): an epoch's working set is in
	// memory. An operator's fan-out (a join's matches) is not bounded
	// by it.
	MaxEpochChanges int
}

// DefaultMaxEpochChanges is Options.MaxEpochChanges' default.
const DefaultMaxEpochChanges = 1 << 20

// Epoch is one step's input.
type Epoch struct {
	// Inputs are the changes on each of the graph's inputs, in the
	// order Input was called; missing trailing ones are empty.
	Inputs [][]types.Change
	// Watermark raises the dataflow's watermark at the epoch's end (a
	// lower one is ignored: it only grows). The epoch's own records are
	// judged late against the watermark before it.
	Watermark time.Time
	// Checkpoint, when not nil, is stored with the epoch's state in one
	// commit: the input positions the epoch consumed, so a restart
	// resumes after them, neither losing nor repeating a change.
	Checkpoint []byte
	// BeforeCommit, when set, runs once the epoch is computed and
	// before it commits: out is the epoch's output (as Step returns
	// it), pending reads the view's contents with the epoch applied.
	// An error rolls the epoch back, as a failed operator does. A sink
	// commits the epoch's output to Kafka here, so the state never
	// commits an epoch whose output was not delivered.
	BeforeCommit func(out []types.Change, pending *View) error
}

// NodeStats are a node's counters since the driver was made.
type NodeStats struct {
	Name    string
	In, Out int64 // changes
	Late    int64 // records dropped as late
	Freed   int64 // state rows freed by the watermark
}

// Driver runs a Graph over a Store, one epoch per Step: the operators'
// state, the view's index and the checkpoint advance in one commit. A
// Driver is used by one goroutine; its View may be read by others.
type Driver struct {
	g         *Graph
	st        Store
	opts      Options
	ctxs      []Context
	stats     []NodeStats
	index     *Index
	epoch     uint64
	watermark time.Time
	cons      consolidator
}

// NewDriver returns a driver of g over st, resuming from st's last
// committed epoch.
func NewDriver(g *Graph, st Store, opts Options) (*Driver, error) {
	if err := g.validate(); err != nil {
		return nil, err
	}
	if opts.MaxEpochChanges <= 0 {
		opts.MaxEpochChanges = DefaultMaxEpochChanges
	}
	spec := IndexSpec{}
	if opts.Index != nil {
		spec = *opts.Index
	}
	d := &Driver{g: g, st: st, opts: opts, ctxs: make([]Context, len(g.nodes)), stats: make([]NodeStats, len(g.nodes))}
	for i, n := range g.nodes {
		d.ctxs[i].State = &prefixed{s: st, prefix: nodePrefix(i)}
		d.stats[i].Name = n.name
	}
	d.index = &Index{spec: spec, st: &prefixed{s: st, prefix: indexPrefix}}
	v, ok, err := st.Get(metaEpoch)
	if err != nil {
		return nil, err
	}
	if ok {
		layout := uint64(1)
		if lv, found, err := st.Get(metaLayout); err != nil {
			return nil, err
		} else if found {
			if layout, _ = binary.Uvarint(lv); layout == 0 {
				return nil, fmt.Errorf("flow: %w: layout", types.ErrCorrupt)
			}
		}
		if layout != StateLayout {
			return nil, fmt.Errorf("%w (%d; this build's is %d)", ErrStaleLayout, layout, StateLayout)
		}
		e, k := binary.Uvarint(v)
		if k <= 0 {
			return nil, fmt.Errorf("flow: %w: epoch", types.ErrCorrupt)
		}
		d.epoch = e
	}
	if v, ok, err = st.Get(metaWatermark); err != nil {
		return nil, err
	} else if ok {
		us, k := binary.Varint(v)
		if k <= 0 {
			return nil, fmt.Errorf("flow: %w: watermark", types.ErrCorrupt)
		}
		d.watermark = time.UnixMicro(us).UTC()
	}
	return d, nil
}

// Epoch is the number of committed epochs.
func (d *Driver) Epoch() uint64 { return d.epoch }

// Watermark is the dataflow's watermark.
func (d *Driver) Watermark() time.Time { return d.watermark }

// Checkpoint returns the checkpoint committed with the last epoch that
// had one.
func (d *Driver) Checkpoint() ([]byte, bool, error) {
	v, ok, err := d.st.Committed().Get(metaCheckpoint)
	return bytes.Clone(v), ok, err
}

// View reads the view's committed contents.
func (d *Driver) View() *View { return &View{spec: d.index.spec, r: d.st.Committed()} }

// Stats returns each node's counters, in node order.
func (d *Driver) Stats() []NodeStats { return append([]NodeStats(nil), d.stats...) }

// Step runs one epoch: every node in order, the output into the index,
// then one commit. It returns the view's changes for the epoch,
// consolidated. On an error nothing of the epoch is kept (the store is
// rolled back) and the driver is as before.
func (d *Driver) Step(e Epoch) ([]types.Change, error) {
	if len(e.Inputs) > len(d.g.inputs) {
		return nil, fmt.Errorf("flow: %d inputs given, the graph has %d", len(e.Inputs), len(d.g.inputs))
	}
	total := 0
	for _, in := range e.Inputs {
		total += len(in)
	}
	if total > d.opts.MaxEpochChanges {
		return nil, fmt.Errorf("flow: epoch of %d changes, at most %d", total, d.opts.MaxEpochChanges)
	}
	out, delta, err := d.step(e)
	if err != nil {
		if rerr := d.st.Rollback(); rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		return nil, err
	}
	for i, n := range delta {
		d.stats[i].In += n.In
		d.stats[i].Out += n.Out
		d.stats[i].Late += n.Late
		d.stats[i].Freed += n.Freed
	}
	return out, nil
}

// step runs the epoch and returns its output and its counters, which
// Step adds to the stats only once the epoch commits.
func (d *Driver) step(e Epoch) ([]types.Change, []NodeStats, error) {
	wm := d.watermark
	if e.Watermark.After(wm) {
		wm = e.Watermark
	}
	outs := make([][]types.Change, len(d.g.nodes))
	for i, in := range d.g.inputs {
		if i < len(e.Inputs) {
			outs[in] = e.Inputs[i]
		}
	}
	delta := make([]NodeStats, len(d.g.nodes))
	ins := make([][]types.Change, 0, 2)
	for i, n := range d.g.nodes {
		if n.op == nil {
			delta[i].In = int64(len(outs[i]))
			delta[i].Out = int64(len(outs[i]))
			continue
		}
		ins = ins[:0]
		for _, in := range n.ins {
			ins = append(ins, outs[in])
			delta[i].In += int64(len(outs[in]))
		}
		ctx := &d.ctxs[i]
		ctx.Watermark, ctx.InputWatermark, ctx.Late, ctx.Freed, ctx.First = wm, d.watermark, 0, 0, d.epoch == 0
		out, err := n.op.Step(ctx, ins)
		if err != nil {
			return nil, nil, fmt.Errorf("flow: node %d (%s): %w", i, n.name, err)
		}
		delta[i].Late = ctx.Late
		delta[i].Freed = ctx.Freed
		delta[i].Out = int64(len(out))
		outs[i] = out
	}
	out := d.cons.consolidate(outs[d.g.output])
	if err := d.index.apply(out, &d.cons); err != nil {
		return nil, nil, err
	}
	if d.epoch == 0 {
		if err := d.st.Set(metaLayout, binary.AppendUvarint(nil, StateLayout)); err != nil {
			return nil, nil, err
		}
	}
	if err := d.st.Set(metaEpoch, binary.AppendUvarint(nil, d.epoch+1)); err != nil {
		return nil, nil, err
	}
	if !wm.IsZero() {
		if err := d.st.Set(metaWatermark, binary.AppendVarint(nil, wm.UnixMicro())); err != nil {
			return nil, nil, err
		}
	}
	if e.Checkpoint != nil {
		if err := d.st.Set(metaCheckpoint, e.Checkpoint); err != nil {
			return nil, nil, err
		}
	}
	if e.BeforeCommit != nil {
		if err := e.BeforeCommit(out, &View{spec: d.index.spec, r: d.st}); err != nil {
			return nil, nil, err
		}
	}
	if err := d.st.Commit(); err != nil {
		return nil, nil, err
	}
	d.epoch++
	d.watermark = wm
	return out, delta, nil
}
