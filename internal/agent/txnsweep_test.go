package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
)

// TestTxnTimeoutAbort leaves a transaction open past its timeout: the
// agent aborts it by the log clock, with the epoch bumped so its producer
// is fenced, its partition's last stable offset moves back to the high
// watermark, and a new producer instance of the id can commit.
func TestTxnTimeoutAbort(t *testing.T) {
	a := start(t, t.TempDir())
	const topic = "txn-timeout"
	createTopic(t, a.KafkaAddr(), topic, 1)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()

	hung := client(t, a.KafkaAddr(), kgo.TransactionalID("hung"), kgo.TransactionTimeout(2*time.Second), kgo.DefaultProduceTopic(topic))
	if err := hung.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := hung.ProduceSync(ctx, &kgo.Record{Value: []byte("never committed")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	first := txnState(t, a.Replica(), "hung")
	if first.Status != meta.TxnOngoing {
		t.Fatalf("state after the first record: %v", first.Status)
	}

	// The sweep needs the log clock past the timeout; agent heartbeats
	// move it. Every apply batch wakes the wait, bounded by the test's
	// guard.
	var s meta.TxnState
	for {
		changed := a.Replica().Changed()
		if s = txnState(t, a.Replica(), "hung"); s.Status != meta.TxnOngoing {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("transaction still ongoing at the guard: %+v", s)
		case <-changed:
		}
	}
	if s.Status != meta.TxnCompleteAbort || s.ProducerEpoch != first.ProducerEpoch+1 || s.PrevBy != meta.BumpByTimeout {
		t.Fatalf("after the timeout: %+v, want CompleteAbort with the epoch bumped by the timeout", s)
	}
	if now := logClock(t, a.Replica()); now-s.StartMs < int64(s.TimeoutMs) {
		t.Errorf("aborted at log clock %d, %d ms after the start; timeout %d ms", now, now-s.StartMs, s.TimeoutMs)
	}
	view := a.Replica().View()
	tp, _, _ := view.Topic(topic)
	st, _, _ := view.Partition(tp.ID, 0)
	lso, err := view.LastStableOffset(tp.ID, 0, st.HighWatermark())
	view.Close()
	if err != nil || lso != st.HighWatermark() || st.HighWatermark() != 2 {
		t.Errorf("LSO %d (%v), high watermark %d; want both 2 (record and abort marker)", lso, err, st.HighWatermark())
	}

	// The hung producer is fenced; a new instance of the id commits.
	if err := hung.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Error("the timed-out producer committed")
	}
	next := client(t, a.KafkaAddr(), kgo.TransactionalID("hung"), kgo.DefaultProduceTopic(topic))
	if err := next.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := next.ProduceSync(ctx, &kgo.Record{Value: []byte("committed")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := next.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("new instance commit: %v", err)
	}
	if s := txnState(t, a.Replica(), "hung"); s.Status != meta.TxnCompleteCommit {
		t.Errorf("after the new instance's commit: %v", s.Status)
	}
}

func txnState(t *testing.T, r *replica.Replica, id string) meta.TxnState {
	t.Helper()
	v := r.View()
	defer v.Close()
	s, ok, err := v.Txn(id)
	if err != nil || !ok {
		t.Fatalf("transactional id %q: %v, %v", id, ok, err)
	}
	return s
}

func logClock(t *testing.T, r *replica.Replica) int64 {
	t.Helper()
	v := r.View()
	defer v.Close()
	c, err := v.LogClock()
	if err != nil {
		t.Fatal(err)
	}
	return c
}
