package replica

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// TestLostReplyAppliesOnce: an append whose reply is lost is retried with
// identical bytes; every copy lands and apply keeps one.
func TestLostReplyAppliesOnce(t *testing.T) {
	log := newFaultLog()
	r := openReplica(t, log, "", "w")
	// Propose may return as soon as the first copy applies, while the
	// appender still retries; the appender is serial, so a proposal after
	// it means the retries are over.
	marker := func(name string) { mustOK(t, r, meta.CreateTopic{Name: name, Partitions: 1}) }

	log.loseReplies.Store(1)
	res := mustPropose(t, r, meta.CreateTopic{Name: "a", Partitions: 1})
	if res.Code != 0 {
		t.Fatalf("create after lost reply: %v (the copy was applied, not dropped)", res.Err())
	}
	id := res.TopicID
	marker("m1")

	log.loseReplies.Store(2)
	res = mustOK(t, r, commitTo(10, partRef{id, 0}))
	if res.Batches[0].BaseOffset != 0 {
		t.Fatalf("base offset %d", res.Batches[0].BaseOffset)
	}
	marker("m2")
	if st := partitionState(t, r, id, 0); st.NextOffset != 10 {
		t.Fatalf("next offset %d after three copies of one commit, want 10", st.NextOffset)
	}
	// The log really holds the copies: 2 of the create, 3 of the commit.
	es := rawEntries(t, log)
	if len(es) != 7 || !bytes.Equal(es[0].Data, es[1].Data) ||
		!bytes.Equal(es[3].Data, es[4].Data) || !bytes.Equal(es[3].Data, es[5].Data) {
		t.Fatalf("log has %d entries, want 7 with the copies", len(es))
	}

	// Appending the same bytes again by hand changes nothing either. The
	// create is the telling one: the commit would be refused anyway as a
	// second commit of its object, but a create after a delete would
	// bring the topic back.
	mustOK(t, r, meta.DeleteTopic{Name: "a"})
	for _, e := range []sharedlog.Entry{es[0], es[3]} {
		if _, err := log.Append(testCtx(t), e.Data); err != nil {
			t.Fatal(err)
		}
	}
	mustSync(t, r)
	if _, ok, _ := viewOf(t, r).Topic("a"); ok {
		t.Fatal("re-appended create applied again")
	}
}

// TestOldIncarnationDropped: an entry of an earlier run of a writer that
// lands after the new run wrote is dropped, whatever its sequence.
func TestOldIncarnationDropped(t *testing.T) {
	log := memlog.New()
	dir := t.TempDir()
	r := openReplica(t, log, dir, "w", func(c *Config) { c.Incarnation = 100 })
	if r.Incarnation() != 100 {
		t.Fatalf("incarnation %d", r.Incarnation())
	}
	mustOK(t, r, meta.CreateTopic{Name: "a", Partitions: 1})
	old := rawEntries(t, log)[0].Data
	// A later entry of the old run that had not landed before the
	// restart: same command, higher sequence.
	e, err := meta.DecodeEntry(old)
	if err != nil {
		t.Fatal(err)
	}
	e.Seq = 1000
	zombie := meta.AppendEntry(nil, &e)
	r.Close()

	r = openReplica(t, log, dir, "w", func(c *Config) { c.Incarnation = 100 })
	if r.Incarnation() != 101 {
		t.Fatalf("reopened incarnation %d, want 101", r.Incarnation())
	}
	mustOK(t, r, meta.DeleteTopic{Name: "a"})
	for _, data := range [][]byte{old, zombie} {
		if _, err := log.Append(testCtx(t), data); err != nil {
			t.Fatal(err)
		}
	}
	mustSync(t, r)
	if _, ok, _ := viewOf(t, r).Topic("a"); ok {
		t.Fatal("an old incarnation's entry applied after the new one wrote")
	}
}

func TestIncarnationChoice(t *testing.T) {
	t.Run("default is the clock", func(t *testing.T) {
		now := time.Unix(1700000000, 123)
		r := openReplica(t, memlog.New(), "", "w", withClock(clock.NewFake(now)))
		if r.Incarnation() != uint64(now.UnixNano()) {
			t.Fatalf("incarnation %d, want %d", r.Incarnation(), now.UnixNano())
		}
	})
	t.Run("same dir never reuses one", func(t *testing.T) {
		// Nothing was proposed, so only the local record knows 7 was used.
		log, dir := memlog.New(), t.TempDir()
		fixed := func(c *Config) { c.Incarnation = 7 }
		r := openReplica(t, log, dir, "w", fixed)
		r.Close()
		r = openReplica(t, log, dir, "w", fixed)
		if r.Incarnation() != 8 {
			t.Fatalf("incarnation %d, want 8", r.Incarnation())
		}
	})
	t.Run("wiped dir learns from the log", func(t *testing.T) {
		log := memlog.New()
		fixed := func(c *Config) { c.Incarnation = 7 }
		r := openReplica(t, log, "", "w", fixed)
		mustOK(t, r, meta.CreateTopic{Name: "a", Partitions: 1})
		r.Close()
		r = openReplica(t, log, "", "w", fixed)
		if r.Incarnation() != 8 {
			t.Fatalf("incarnation %d, want 8", r.Incarnation())
		}
	})
}

// TestFenced: a second live replica with the same writer id takes the id
// over; the first one's proposals fail instead of hanging or colliding.
func TestFenced(t *testing.T) {
	log := memlog.New()
	a := openReplica(t, log, "", "same")
	mustOK(t, a, meta.CreateTopic{Name: "a", Partitions: 1})
	b := openReplica(t, log, "", "same")
	if b.Incarnation() <= a.Incarnation() {
		t.Fatalf("b incarnation %d not above a's %d", b.Incarnation(), a.Incarnation())
	}
	mustOK(t, b, meta.CreateTopic{Name: "b", Partitions: 1})
	_, err := a.Propose(testCtx(t), meta.CreateTopic{Name: "c", Partitions: 1})
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("a.Propose after b took over: %v, want ErrFenced", err)
	}
	mustOK(t, b, meta.CreateTopic{Name: "d", Partitions: 1})
}

// TestAppendFailures pins the one retry layer: the appender sends an
// entry again, with identical bytes, only while the log says the outcome
// is unknown, waits on the replica's clock between tries, and stops at
// once when the log refuses the entry for good.
func TestAppendFailures(t *testing.T) {
	t.Run("ambiguous after retries", func(t *testing.T) {
		log := newFaultLog()
		r := openReplica(t, log, "", "w")
		before := len(log.sentEntries())
		log.failAppends.Store(maxAppendAttempts)
		_, err := r.Propose(testCtx(t), meta.CreateTopic{Name: "a", Partitions: 1})
		if !errors.Is(err, ErrAmbiguous) {
			t.Fatalf("Propose = %v, want ErrAmbiguous", err)
		}
		if n := len(log.sentEntries()) - before; n != maxAppendAttempts {
			t.Fatalf("%d appends, want %d", n, maxAppendAttempts)
		}
		// The writer carries on with the next sequence.
		mustOK(t, r, meta.CreateTopic{Name: "a", Partitions: 1})
	})
	t.Run("retries hide transient failures", func(t *testing.T) {
		log := newFaultLog()
		r := openReplica(t, log, "", "w")
		before := len(log.sentEntries())
		log.failAppends.Store(maxAppendAttempts - 1)
		mustOK(t, r, meta.CreateTopic{Name: "a", Partitions: 1})
		sent := log.sentEntries()[before:]
		if len(sent) != maxAppendAttempts {
			t.Fatalf("%d appends, want %d", len(sent), maxAppendAttempts)
		}
		for i, e := range sent[1:] {
			if !bytes.Equal(e, sent[0]) {
				t.Fatalf("try %d sent other bytes than the first", i+2)
			}
		}
	})
	t.Run("the retry waits on the clock", func(t *testing.T) {
		log := newFaultLog()
		clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
		r := openReplica(t, log, "", "w", withClock(clk))
		log.failAppends.Store(1)
		done := make(chan error, 1)
		go func() {
			_, err := r.Propose(testCtx(t), meta.CreateTopic{Name: "a", Partitions: 1})
			done <- err
		}()
		// The memory log wakes the player itself, so the only timer is
		// the retry's, of at least half the first backoff.
		if err := clk.BlockUntil(testCtx(t), 1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(appendRetry.Min/2 - time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("Propose returned %v before the backoff passed", err)
		default:
		}
		clk.Advance(appendRetry.Min)
		if err := <-done; err != nil {
			t.Fatalf("Propose = %v", err)
		}
	})
	t.Run("rejected is not retried", func(t *testing.T) {
		log := newFaultLog()
		r := openReplica(t, log, "", "w")
		before := len(log.sentEntries())
		log.rejectAppends.Store(1)
		_, err := r.Propose(testCtx(t), meta.CreateTopic{Name: "a", Partitions: 1})
		if !errors.Is(err, sharedlog.ErrRejected) || errors.Is(err, ErrAmbiguous) {
			t.Fatalf("Propose = %v, want ErrRejected and not ambiguous", err)
		}
		if n := len(log.sentEntries()) - before; n != 1 {
			t.Fatalf("%d appends of a rejected entry, want 1", n)
		}
		mustOK(t, r, meta.CreateTopic{Name: "a", Partitions: 1})
	})
	t.Run("rejected after an ambiguous try is ambiguous", func(t *testing.T) {
		// The first try's outcome is unknown, so the entry may be in
		// the log whatever the second try says.
		log := newFaultLog()
		r := openReplica(t, log, "", "w")
		before := len(log.sentEntries())
		log.failAppends.Store(1)
		log.rejectAppends.Store(1)
		_, err := r.Propose(testCtx(t), meta.CreateTopic{Name: "a", Partitions: 1})
		if !errors.Is(err, ErrAmbiguous) {
			t.Fatalf("Propose = %v, want ErrAmbiguous", err)
		}
		if n := len(log.sentEntries()) - before; n != 2 {
			t.Fatalf("%d appends, want 2", n)
		}
	})
	t.Run("sealed is definite", func(t *testing.T) {
		log := memlog.New()
		r := openReplica(t, log, "", "w")
		if err := log.Seal(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		_, err := r.Propose(testCtx(t), meta.CreateTopic{Name: "a", Partitions: 1})
		if !errors.Is(err, sharedlog.ErrSealed) || errors.Is(err, ErrAmbiguous) {
			t.Fatalf("Propose = %v, want ErrSealed and not ambiguous", err)
		}
	})
}

// TestReopenResumes: a reopened copy continues from its stored position
// without reading (let alone applying) the entries below it again, and
// catches up with what others wrote meanwhile.
func TestReopenResumes(t *testing.T) {
	// Only r reads through log, so log sees r's reads alone.
	inner := memlog.New()
	log := &faultLog{Log: inner}
	dir := t.TempDir()
	r := openReplica(t, log, dir, "a")
	other := openReplica(t, inner, "", "b")
	id := mustOK(t, r, meta.CreateTopic{Name: "t", Partitions: 2}).TopicID
	for range 20 {
		mustOK(t, r, commitTo(5, partRef{id, 0}, partRef{id, 1}))
	}
	mustSync(t, r)
	applied, digest := r.NextToApply(), mustDigest(t, r)
	r.Close()

	log.readFroms.Lock()
	log.readFroms.any = false
	log.readFroms.Unlock()
	r = openReplica(t, log, dir, "a")
	if got := mustDigest(t, r); got != digest || r.NextToApply() != applied {
		t.Fatalf("reopened at %d digest %x, closed at %d digest %x", r.NextToApply(), got, applied, digest)
	}
	log.readFroms.Lock()
	readBelow := log.readFroms.any && log.readFroms.min < applied
	log.readFroms.Unlock()
	if readBelow {
		t.Fatalf("reopened replica read from %d, below its applied position %d", log.readFroms.min, applied)
	}
	if st := partitionState(t, r, id, 0); st.NextOffset != 100 {
		t.Fatalf("next offset %d after reopen, want 100", st.NextOffset)
	}

	// Entries written while a copy is closed are played on open.
	r.Close()
	mustOK(t, other, commitTo(5, partRef{id, 0}))
	r = openReplica(t, log, dir, "a")
	if st := partitionState(t, r, id, 0); st.NextOffset != 105 {
		t.Fatalf("next offset %d, want 105", st.NextOffset)
	}
	mustSync(t, other)
	if mustDigest(t, r) != mustDigest(t, other) {
		t.Fatal("digests differ after catch-up")
	}
}

// TestHalt: an entry a replica cannot apply stops it at that position,
// with the cause, for every caller, and again after a restart.
func TestHalt(t *testing.T) {
	good := func(seq uint64) []byte {
		return meta.AppendEntry(nil, &meta.Entry{WriterID: "raw", Incarnation: 1, Seq: seq, Timestamp: 1,
			Commands: []meta.RawCommand{meta.EncodeCommand(meta.CreateTopic{Name: "x", Partitions: 1})}})
	}
	badCRC := good(2)
	badCRC[len(badCRC)-1] ^= 1
	tests := []struct {
		name  string
		entry []byte
		cause error
	}{
		{"unknown type", meta.AppendEntry(nil, &meta.Entry{WriterID: "raw", Incarnation: 1, Seq: 2,
			Commands: []meta.RawCommand{{Type: 999, Version: 1}}}), meta.ErrUnknownCommand},
		{"unknown version", meta.AppendEntry(nil, &meta.Entry{WriterID: "raw", Incarnation: 1, Seq: 2,
			Commands: []meta.RawCommand{{Type: meta.TypeCreateTopic, Version: 2, Payload: meta.EncodeCommand(meta.CreateTopic{Name: "y", Partitions: 1}).Payload}}}), meta.ErrUnknownCommand},
		{"undecodable payload", meta.AppendEntry(nil, &meta.Entry{WriterID: "raw", Incarnation: 1, Seq: 2,
			Commands: []meta.RawCommand{{Type: meta.TypeCreateTopic, Version: 1, Payload: []byte{0xff}}}}), meta.ErrCorrupt},
		{"bad checksum", badCRC, meta.ErrCorrupt},
		{"garbage", []byte("not an entry at all"), meta.ErrCorrupt},
		{"unknown entry format", withChecksum(append([]byte{2}, good(2)[1:len(good(2))-4]...)), meta.ErrUnknownCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := memlog.New()
			dir := t.TempDir()
			r := openReplica(t, log, dir, "w")
			select {
			case <-r.Halted():
				t.Fatal("Halted closed before any halt")
			default:
			}
			ctx := testCtx(t)
			for _, data := range [][]byte{good(1), tt.entry, good(3)} {
				if _, err := log.Append(ctx, data); err != nil {
					t.Fatal(err)
				}
			}
			err := r.Sync(ctx)
			var h *HaltError
			if !errors.As(err, &h) || !errors.Is(err, ErrHalted) || h.Pos != 1 || !errors.Is(err, tt.cause) {
				t.Fatalf("Sync = %v, want a halt at 1 caused by %v", err, tt.cause)
			}
			if r.NextToApply() != 1 || !errors.Is(r.Err(), ErrHalted) {
				t.Fatalf("applied %d, Err %v", r.NextToApply(), r.Err())
			}
			select {
			case <-r.Halted():
			default:
				t.Fatal("Halted not closed after the halt")
			}
			if _, ok, _ := viewOf(t, r).Topic("x"); !ok {
				t.Fatal("the entry before the bad one was not applied")
			}
			if _, err := r.Propose(ctx, meta.CreateTopic{Name: "z", Partitions: 1}); !errors.Is(err, ErrHalted) {
				t.Fatalf("Propose on a halted replica: %v", err)
			}
			if err := r.WaitApplied(ctx, 3); !errors.Is(err, ErrHalted) {
				t.Fatalf("WaitApplied on a halted replica: %v", err)
			}
			r.Close()
			_, err = tryOpen(t, log, dir, "w")
			if !errors.As(err, &h) || h.Pos != 1 {
				t.Fatalf("reopen = %v, want the same halt", err)
			}
		})
	}
}
