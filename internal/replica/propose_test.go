package replica

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// TestSyncSharesTailChecks: callers that arrive while a tail check is in
// flight share the next one (not the in-flight one, which may predate
// their call), so eleven Syncs make two checks and all see a write
// acknowledged before ten of them started.
func TestSyncSharesTailChecks(t *testing.T) {
	flog := newFaultLog()
	log := pollingLog{flog}
	// A far poll interval: only Sync and the replica's own appends move
	// what the reader applies.
	slow := func(c *Config) { c.PollInterval = testTimeout * 10 }
	reader := openReplica(t, log, "", "reader", slow)
	writer := openReplica(t, log, "", "writer", slow)
	joined := make(chan struct{}, 16)
	reader.tails.onJoin = func() { joined <- struct{}{} }

	ctx := testCtx(t)
	entered := flog.tailGate.arm()
	flog.checkTails.Store(0)
	errs := make(chan error, 11)
	go func() { errs <- reader.Sync(ctx) }()
	recv(t, entered, "the first tail check")
	// The in-flight check has read the tail; now a write is acknowledged.
	mustOK(t, writer, meta.CreateTopic{Name: "t", Partitions: 1})
	for range 10 {
		go func() { errs <- reader.Sync(ctx) }()
	}
	for range 10 {
		recv(t, joined, "a Sync to join")
	}
	flog.tailGate.release()
	for range 11 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := flog.checkTails.Load(); n != 2 {
		t.Fatalf("%d tail checks for 11 Syncs, want 2", n)
	}
	if _, ok, _ := viewOf(t, reader).Topic("t"); !ok {
		t.Fatal("a Sync that began after the write returned without it")
	}
}

// TestGroupCommit: proposals queued while an append is in flight go out
// together in the next entry, and each gets its own result.
func TestGroupCommit(t *testing.T) {
	flog := newFaultLog()
	r := openReplica(t, flog, "", "w")
	ctx := testCtx(t)
	entered := flog.appendGate.arm()
	first := make(chan error, 1)
	go func() {
		_, err := r.Propose(ctx, meta.CreateTopic{Name: "first", Partitions: 1})
		first <- err
	}()
	recv(t, entered, "the first append")
	var ps []*proposal
	for i := range 20 {
		p, err := r.newProposal([]meta.Command{meta.CreateTopic{Name: fmt.Sprintf("t%d", i), Partitions: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.enqueue(ctx, p); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	flog.appendGate.release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		recv(t, p.done, "a proposal")
		if p.err != nil || len(p.results) != 1 || p.results[0].Code != 0 {
			t.Fatalf("proposal %d: %v, %+v", i, p.err, p.results)
		}
		if id := topicID(t, r, fmt.Sprintf("t%d", i)); id != p.results[0].TopicID {
			t.Fatalf("proposal %d got id %v, topic has %v", i, p.results[0].TopicID, id)
		}
	}
	es := rawEntries(t, flog)
	if len(es) != 2 {
		t.Fatalf("%d entries, want 2", len(es))
	}
	e, err := meta.DecodeEntry(es[1].Data)
	if err != nil || len(e.Commands) != 20 || e.Seq != 2 {
		t.Fatalf("second entry: %d commands, seq %d, %v", len(e.Commands), e.Seq, err)
	}
}

// TestBackpressure: a full queue refuses a proposal until the appender
// drains it, and entries respect MaxEntryCommands.
func TestBackpressure(t *testing.T) {
	flog := newFaultLog()
	r := openReplica(t, flog, "", "w", func(c *Config) {
		c.MaxEntryCommands = 1
		c.MaxPendingCommands = 2
	})
	ctx := testCtx(t)
	entered := flog.appendGate.arm()
	first := make(chan error, 1)
	go func() {
		_, err := r.Propose(ctx, meta.CreateTopic{Name: "first", Partitions: 1})
		first <- err
	}()
	recv(t, entered, "the first append")
	newP := func(name string) *proposal {
		p, err := r.newProposal([]meta.Command{meta.CreateTopic{Name: name, Partitions: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p2, p3, p4 := newP("p2"), newP("p3"), newP("p4")
	for _, p := range []*proposal{p2, p3} {
		if err := r.enqueue(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := r.enqueue(canceled, p4); !errors.Is(err, context.Canceled) {
		t.Fatalf("enqueue into a full queue = %v, want it to wait (and see ctx canceled)", err)
	}
	flog.appendGate.release()
	if err := r.enqueue(ctx, p4); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for _, p := range []*proposal{p2, p3, p4} {
		recv(t, p.done, "a proposal")
		if p.err != nil {
			t.Fatal(p.err)
		}
	}
	if es := rawEntries(t, flog); len(es) != 4 {
		t.Fatalf("%d entries, want 4 of one command each", len(es))
	}
}

func TestTooLarge(t *testing.T) {
	r := openReplica(t, memlog.New(), "", "w", func(c *Config) {
		c.MaxEntryCommands = 2
		c.MaxEntryBytes = 4096
	})
	ctx := testCtx(t)
	three := []meta.Command{meta.CreateTopic{Name: "a"}, meta.CreateTopic{Name: "b"}, meta.CreateTopic{Name: "c"}}
	if _, err := r.ProposeBatch(ctx, three); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("3 commands: %v", err)
	}
	big := meta.CreateTopic{Name: "a", Partitions: 1, Configs: map[string]string{"x": strings.Repeat("v", 4096)}}
	if _, err := r.Propose(ctx, big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("4 KiB config: %v", err)
	}
	mustOK(t, r, meta.CreateTopic{Name: "a", Partitions: 1})
}

func TestCloseAndChanged(t *testing.T) {
	log := memlog.New()
	a := openReplica(t, log, "", "a")
	b := openReplica(t, log, "", "b")
	ch := b.Changed()
	mustOK(t, a, meta.CreateTopic{Name: "t", Partitions: 1})
	recv(t, ch, "b to apply a's entry")

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := testCtx(t)
	if err := b.Sync(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
	if _, err := b.Propose(ctx, meta.CreateTopic{Name: "u", Partitions: 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Propose after Close: %v", err)
	}
	if err := b.WaitApplied(ctx, 1000); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitApplied after Close: %v", err)
	}
}

// TestCloseFailsPending: proposals stuck behind a blocked append fail with
// ErrClosed when the replica closes, instead of hanging.
func TestCloseFailsPending(t *testing.T) {
	flog := newFaultLog()
	r := openReplica(t, flog, "", "w")
	ctx := testCtx(t)
	entered := flog.appendGate.arm()
	defer flog.appendGate.release()
	errs := make(chan error, 2)
	go func() {
		_, err := r.Propose(ctx, meta.CreateTopic{Name: "a", Partitions: 1})
		errs <- err
	}()
	recv(t, entered, "the append")
	p, err := r.newProposal([]meta.Command{meta.CreateTopic{Name: "b", Partitions: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.enqueue(ctx, p); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := <-errs; !errors.Is(err, ErrClosed) && !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("in-flight proposal: %v", err)
	}
	recv(t, p.done, "the queued proposal")
	if !errors.Is(p.err, ErrClosed) {
		t.Fatalf("queued proposal: %v", p.err)
	}
}

// Submit fixes the log order at queueing time: commands queued while an
// append is stuck land after it, in queue order, and Wait sees each
// result.
func TestSubmitOrder(t *testing.T) {
	fl := newFaultLog()
	r := openReplica(t, fl, "", "w")
	mustOK(t, r, meta.CreateTopic{Name: "a", Partitions: 1})
	entered := fl.appendGate.arm()
	ctx := testCtx(t)
	first, err := r.Submit(ctx, []meta.Command{groupCommit("a", 1)})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, entered, "the first append")
	var pending []*Proposal
	for i := int64(2); i <= 10; i++ {
		p, err := r.Submit(ctx, []meta.Command{groupCommit("a", i)})
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, p)
	}
	fl.appendGate.release()
	for _, p := range append([]*Proposal{first}, pending...) {
		res, err := p.Wait(ctx)
		if err != nil || res[0].Code != 0 {
			t.Fatalf("Wait = %+v, %v", res, err)
		}
	}
	v := viewOf(t, r)
	if o, _, err := v.CommittedOffset("g", topicID(t, r, "a"), 0); err != nil || o.Offset != 10 {
		t.Fatalf("offset %d (%v), want the last submitted, 10", o.Offset, err)
	}
	// The nine queued behind the stuck append share one entry.
	if n := len(rawEntries(t, fl)); n != 3 {
		t.Fatalf("%d entries, want 3 (topic, first commit, the other nine)", n)
	}
}

// groupCommit commits group "g"'s offset of partition 0 of topic, as a
// standalone consumer does.
func groupCommit(topic string, offset int64) meta.OffsetCommit {
	return meta.OffsetCommit{Group: "g", Generation: -1, RetentionMs: -1, Offsets: []meta.OffsetCommitPartition{
		{Topic: topic, Offset: offset, LeaderEpoch: -1, CommitTimestamp: -1},
	}}
}
