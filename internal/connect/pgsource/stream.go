package pgsource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/clock"
)

// statusMinGap is the least time between two standby status updates
// that only move the confirmed LSN, and how long a read of the stream
// waits before looking at the confirmed LSN again.
const statusMinGap = 100 * time.Millisecond

// startFromSlot is a test seam (export_test.go): stream from the
// slot's confirmed LSN (0 asks for it) instead of the offset, which the
// server otherwise skips to.
var startFromSlot atomic.Bool

// item is what the reader hands the writer: a decoded pgoutput message
// and the LSN of the WAL record it came from, or (msg nil) a keepalive
// saying the server has sent everything before walEnd.
type item struct {
	lsn    uint64
	msg    pglogrepl.Message
	walEnd uint64
}

// stream reads the slot from off and writes each captured PostgreSQL
// transaction's changes into Kafka transactions, confirming an LSN to
// the server only once the Kafka transaction holding it committed.
func (r *run) stream(ctx context.Context, conn *pgx.Conn, repl *pgconn.PgConn, off Offset) error {
	from := off.LSN
	if startFromSlot.Load() {
		from = 0
	}
	if err := r.startReplication(ctx, conn, repl, from); err != nil {
		return err
	}
	r.log.Info("streaming", "slot", r.cfg.Slot, "from", pglogrepl.LSN(off.LSN), "last_commit", pglogrepl.LSN(off.CommitLSN))
	var confirmed atomic.Uint64
	confirmed.Store(off.LSN)
	r.m.confirmedLSN.WithLabelValues(r.name).Set(float64(off.LSN))

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	items := make(chan item, r.cfg.MaxQueue)
	readErr := make(chan error, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(2)
	go func() {
		defer wg.Done()
		readErr <- r.read(sctx, repl, items, &confirmed)
	}()
	go func() {
		defer wg.Done()
		r.measure(sctx)
	}()
	w := &writer{r: r, conn: conn, confirmed: &confirmed, committed: off, tables: map[uint32]*table{}}
	return w.loop(sctx, items, readErr)
}

// startReplication starts streaming, waiting a while for an earlier
// owner to let go of the slot.
func (r *run) startReplication(ctx context.Context, conn *pgx.Conn, repl *pgconn.PgConn, from uint64) error {
	args := []string{"proto_version '1'", "publication_names '" + r.cfg.Publication + "'"}
	for i := 0; ; i++ {
		err := pglogrepl.StartReplication(ctx, repl, r.cfg.Slot, pglogrepl.LSN(from),
			pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication, PluginArgs: args})
		if err == nil {
			return nil
		}
		if pgCode(err) != "55006" || i >= slotBusyRetries { // object_in_use: another walsender has the slot
			return fmt.Errorf("starting replication from slot %q: %w", r.cfg.Slot, err)
		}
		if err := r.slotBusy(ctx, conn, i, err); err != nil {
			return err
		}
	}
}

// slotBusy waits for the slot's walsender to go. After
// slotTerminateAfter tries it terminates that walsender: this task's
// InitProducerID has fenced every earlier owner, which can no longer
// commit (and so never confirms past what it committed), but one that
// is idle would only find out at its next commit and hold the slot
// meanwhile.
func (r *run) slotBusy(ctx context.Context, conn *pgx.Conn, try int, err error) error {
	r.log.Info("replication slot in use; waiting", "slot", r.cfg.Slot, "err", err)
	if try+1 == slotTerminateAfter {
		var pid *int32
		if qerr := conn.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, r.cfg.Slot).Scan(&pid); qerr == nil && pid != nil {
			var ok bool
			if terr := conn.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, *pid).Scan(&ok); terr != nil {
				r.log.Warn("cannot terminate the walsender holding the slot", "slot", r.cfg.Slot, "pid", *pid, "err", terr)
			} else {
				r.log.Warn("terminated the walsender of an earlier, fenced owner holding the slot", "slot", r.cfg.Slot, "pid", *pid)
			}
		}
	}
	return clock.Sleep(ctx, r.clk, slotBusyWait)
}

// read owns the replication connection: it decodes what the server
// sends into items (blocking when the writer is MaxQueue behind), and
// answers keepalives and sends the confirmed LSN every StatusInterval,
// even while blocked, so the server never times the slot out on us.
func (r *run) read(ctx context.Context, repl *pgconn.PgConn, items chan<- item, confirmed *atomic.Uint64) error {
	var sent uint64
	var sentAt time.Time
	// status reports the confirmed LSN: when forced (the server asked),
	// every StatusInterval, and soon after it moves, so the slot
	// follows the Kafka commits closely without a message each.
	status := func(force bool) error {
		lsn := confirmed.Load()
		now := r.clk.Now()
		if !force && now.Sub(sentAt) < r.cfg.StatusInterval && (lsn == sent || now.Sub(sentAt) < statusMinGap) {
			return nil
		}
		err := pglogrepl.SendStandbyStatusUpdate(ctx, repl, pglogrepl.StandbyStatusUpdate{
			WALWritePosition: pglogrepl.LSN(lsn), WALFlushPosition: pglogrepl.LSN(lsn), WALApplyPosition: pglogrepl.LSN(lsn), ClientTime: now})
		if err != nil {
			return fmt.Errorf("standby status update: %w", err)
		}
		sent, sentAt = lsn, now
		return nil
	}
	push := func(it item) error {
		select {
		case items <- it:
			return nil
		default:
		}
		// The writer is behind: wait, still reporting to the server.
		for {
			tick, timer := clock.After(r.clk, statusMinGap)
			select {
			case items <- it:
				clock.Stop(timer)
				return nil
			case <-tick:
				if err := status(false); err != nil {
					return err
				}
			case <-ctx.Done():
				clock.Stop(timer)
				return ctx.Err()
			}
		}
	}
	for {
		if err := status(false); err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, statusMinGap)
		raw, err := repl.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if pgconn.Timeout(err) {
				continue
			}
			return fmt.Errorf("replication stream: %w", err)
		}
		switch msg := raw.(type) {
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("replication stream: %w", pgconn.ErrorResponseToPgError(msg))
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				continue
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				pkm, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					return err
				}
				// Every change before ServerWALEnd has been sent: the
				// writer may confirm it once it has nothing open.
				select {
				case items <- item{walEnd: uint64(pkm.ServerWALEnd)}:
				default:
				}
				if pkm.ReplyRequested {
					if err := status(true); err != nil {
						return err
					}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					return err
				}
				// The connection reuses its buffer for the next
				// message; the writer keeps this one's bytes.
				data := append([]byte(nil), xld.WALData...)
				lm, err := pglogrepl.Parse(data)
				if err != nil {
					return fmt.Errorf("pgoutput at %s: %w", xld.WALStart, err)
				}
				if err := push(item{lsn: uint64(xld.WALStart), msg: lm}); err != nil {
					return err
				}
			}
		}
	}
}

// writer turns decoded messages into Kafka transactions.
type writer struct {
	r         *run
	conn      *pgx.Conn
	confirmed *atomic.Uint64
	// committed is the last offset committed to Kafka (or read at
	// start): transactions at or below its commit LSN are resent.
	committed Offset
	tables    map[uint32]*table // by relation id; nil: not captured
	// the PostgreSQL transaction being read
	inTxn    bool
	skipping bool
	txID     uint32
	txTime   int64 // commit time, unix micros
	// the open Kafka transaction
	open       bool
	opened     time.Time
	records    int
	ops        [4]int // c, u, d, r
	pgTxns     int
	pending    Offset // the last PostgreSQL transaction read into it
	walEnd     uint64 // a keepalive's position seen while it was open
	lastCommit uint64 // the previous PostgreSQL transaction's commit LSN
}

func (w *writer) loop(ctx context.Context, items <-chan item, readErr <-chan error) error {
	r := w.r
	w.lastCommit = w.committed.CommitLSN
	var deadline <-chan struct{}
	var timer clock.Timer
	defer func() {
		if timer != nil {
			clock.Stop(timer)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readErr:
			return err
		case <-deadline:
			deadline, timer = nil, nil
			if w.open && !w.inTxn {
				if err := w.commit(ctx); err != nil {
					return err
				}
			}
		case it := <-items:
			wasOpen := w.open
			if err := w.handle(ctx, it); err != nil {
				return err
			}
			if w.open && !w.inTxn && len(items) == 0 {
				// At a transaction's end with nothing more come
				// in: commit now, as Debezium hands a batch on as
				// soon as its queue has one (poll.interval.ms is
				// its wait when the queue is empty). What arrives
				// during the commit makes the next batch, so
				// batches grow with the load, up to max.batch.size.
				if err := w.commit(ctx); err != nil {
					return err
				}
			}
			if w.open && !wasOpen {
				deadline, timer = clock.After(r.clk, r.cfg.PollInterval)
			}
			if !w.open && timer != nil {
				clock.Stop(timer)
				deadline, timer = nil, nil
			}
		}
		if err := r.produceErr(); err != nil {
			return fmt.Errorf("producing: %w", err)
		}
	}
}

func (w *writer) handle(ctx context.Context, it item) error {
	r := w.r
	switch m := it.msg.(type) {
	case nil:
		if w.inTxn {
			return nil
		}
		if !w.open {
			w.confirm(it.walEnd)
			r.m.lagSeconds.WithLabelValues(r.name).Set(0)
		} else {
			w.walEnd = max(w.walEnd, it.walEnd)
		}
	case *pglogrepl.RelationMessage:
		return w.relation(ctx, m)
	case *pglogrepl.BeginMessage:
		w.inTxn, w.txID, w.txTime = true, m.Xid, m.CommitTime.UnixMicro()
		w.skipping = uint64(m.FinalLSN) <= w.committed.CommitLSN
		if w.skipping {
			r.m.skippedResent.WithLabelValues(r.name).Inc()
		}
	case *pglogrepl.CommitMessage:
		w.inTxn = false
		if w.skipping {
			w.skipping = false
			if !w.open {
				w.confirm(uint64(m.TransactionEndLSN))
			}
			return nil
		}
		w.pending = Offset{LSN: uint64(m.TransactionEndLSN), CommitLSN: uint64(m.CommitLSN), TxID: w.txID,
			TsUsec: m.CommitTime.UnixMicro(), SnapshotCompleted: true}
		w.lastCommit = uint64(m.CommitLSN)
		if !w.open {
			// Nothing of it was captured: nothing to write.
			w.confirm(uint64(m.TransactionEndLSN))
			return nil
		}
		w.pgTxns++
		if w.records >= r.cfg.MaxBatchRecords || clock.Since(r.clk, w.opened) >= r.cfg.PollInterval {
			return w.commit(ctx)
		}
	case *pglogrepl.InsertMessage:
		if t := w.capture(m.RelationID); t != nil {
			return w.emit(ctx, t, it.lsn, 'c', nil, w.tuple(m.Tuple))
		}
	case *pglogrepl.UpdateMessage:
		t := w.capture(m.RelationID)
		if t == nil {
			return nil
		}
		after := w.tuple(m.NewTuple)
		var before *tuple
		if m.OldTuple != nil {
			before = w.tuple(m.OldTuple)
		}
		// A key changed: Debezium writes a delete (and tombstone) of
		// the old key and a create of the new one.
		if before != nil && len(t.key) > 0 && keyChanged(t, before, after) {
			if err := w.emit(ctx, t, it.lsn, 'd', before, nil); err != nil {
				return err
			}
			return w.emit(ctx, t, it.lsn, 'c', nil, after)
		}
		if !t.fullIdentity {
			// Only the key columns of the old row are known; Debezium
			// then writes no before image.
			before = nil
		}
		return w.emit(ctx, t, it.lsn, 'u', before, after)
	case *pglogrepl.DeleteMessage:
		if t := w.capture(m.RelationID); t != nil {
			return w.emit(ctx, t, it.lsn, 'd', w.tuple(m.OldTuple), nil)
		}
	}
	// Truncate, Type, Origin and logical messages: Debezium skips
	// truncates by default (skipped.operations=t) and so does Strand.
	return nil
}

func keyChanged(t *table, before, after *tuple) bool {
	for _, k := range t.key {
		if k >= len(before.vals) || k >= len(after.vals) {
			return true
		}
		if after.toast != nil && after.toast[k] {
			continue
		}
		if string(before.vals[k]) != string(after.vals[k]) || (before.vals[k] == nil) != (after.vals[k] == nil) {
			return true
		}
	}
	return false
}

// capture is relation id's table if it is captured and the
// transaction is not one already committed.
func (w *writer) capture(rel uint32) *table {
	if w.skipping {
		return nil
	}
	return w.tables[rel]
}

func (w *writer) tuple(td *pglogrepl.TupleData) *tuple {
	if td == nil {
		return &tuple{}
	}
	tp := &tuple{vals: make([][]byte, len(td.Columns))}
	for i, c := range td.Columns {
		switch c.DataType {
		case pglogrepl.TupleDataTypeText, pglogrepl.TupleDataTypeBinary:
			tp.vals[i] = c.Data
			if tp.vals[i] == nil {
				tp.vals[i] = []byte{}
			}
		case pglogrepl.TupleDataTypeToast:
			if tp.toast == nil {
				tp.toast = make([]bool, len(td.Columns))
			}
			tp.toast[i] = true
		}
	}
	return tp
}

// relation records a table's current shape: the next records'
// schemas follow it (a column added or dropped half-way shows there).
func (w *writer) relation(ctx context.Context, m *pglogrepl.RelationMessage) error {
	r := w.r
	if !r.cfg.Captured(m.Namespace, m.RelationName) {
		w.tables[m.RelationID] = nil
		return nil
	}
	notNull, pk, err := catalogInfo(ctx, w.conn, m.RelationID)
	if err != nil {
		return fmt.Errorf("catalog of %s.%s: %w", m.Namespace, m.RelationName, err)
	}
	defs := make([]colDef, len(m.Columns))
	for i, c := range m.Columns {
		defs[i] = colDef{name: c.Name, oid: c.DataType, typmod: c.TypeModifier}
	}
	t, err := r.buildTable(m.Namespace, m.RelationName, defs, notNull, pk, m.ReplicaIdentity == 'f')
	if err != nil {
		return err
	}
	if err := r.ensureTopic(ctx, t.topic); err != nil {
		return err
	}
	w.tables[m.RelationID] = t
	return nil
}

// emit produces one change (and a delete's tombstone) into the open
// Kafka transaction, opening it if needed.
func (w *writer) emit(ctx context.Context, t *table, lsn uint64, op byte, before, after *tuple) error {
	r := w.r
	if !w.open {
		if err := r.prod.BeginTransaction(); err != nil {
			return err
		}
		w.open, w.opened = true, r.clk.Now()
	}
	ev := event{op: op, before: before, after: after, snapshot: "false", tsMicros: w.txTime, txID: w.txID, lsn: lsn, lastCommit: w.lastCommit}
	keyOf := after
	if keyOf == nil {
		keyOf = before
	}
	key, err := r.enc.key(ctx, t, keyOf)
	if err != nil {
		return fmt.Errorf("%s.%s at %s: %w", t.schema, t.name, pglogrepl.LSN(lsn), err)
	}
	val, err := r.enc.value(ctx, t, &ev, r.clk.Now().UnixMicro())
	if err != nil {
		return fmt.Errorf("%s.%s at %s: %w", t.schema, t.name, pglogrepl.LSN(lsn), err)
	}
	r.prod.Produce(ctx, &kgo.Record{Topic: t.topic, Key: key, Value: val}, r.promise)
	w.records++
	w.ops[opIndex(op)]++
	if op == 'd' && r.cfg.Tombstones && key != nil { // no key, nothing for compaction to drop
		r.prod.Produce(ctx, &kgo.Record{Topic: t.topic, Key: key}, r.promise)
		w.records++
	}
	return nil
}

func opIndex(op byte) int {
	switch op {
	case 'c':
		return 0
	case 'u':
		return 1
	case 'd':
		return 2
	}
	return 3
}

// commit commits the open Kafka transaction with the offset of its
// last PostgreSQL transaction, then confirms that transaction's end to
// the server.
func (w *writer) commit(ctx context.Context) error {
	r := w.r
	if err := r.commit(ctx, w.pending); err != nil {
		return err
	}
	w.committed = w.pending
	now := r.clk.Now()
	for i, op := range []string{"c", "u", "d", "r"} {
		if w.ops[i] > 0 {
			r.m.records.WithLabelValues(r.name, op).Add(float64(w.ops[i]))
		}
	}
	r.m.sourceTxns.WithLabelValues(r.name).Add(float64(w.pgTxns))
	r.m.lagSeconds.WithLabelValues(r.name).Set(now.Sub(time.UnixMicro(w.pending.TsUsec)).Seconds())
	w.open, w.records, w.ops, w.pgTxns = false, 0, [4]int{}, 0
	w.confirm(max(w.pending.LSN, w.walEnd))
	w.walEnd = 0
	return nil
}

// confirm lets the reader report lsn as flushed: everything before it
// is committed in Kafka or was never captured.
func (w *writer) confirm(lsn uint64) {
	for {
		cur := w.confirmed.Load()
		if lsn <= cur || w.confirmed.CompareAndSwap(cur, lsn) {
			break
		}
	}
	w.r.m.confirmedLSN.WithLabelValues(w.r.name).Set(float64(w.confirmed.Load()))
}

// measure sets the slot's lag gauges every measureInterval, on a
// connection of its own.
func (r *run) measure(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.WithoutCancel(ctx))
		}
	}()
	for {
		if conn == nil {
			c, err := r.cfg.connect(ctx, "strand-connect-"+r.name+"-metrics")
			if err == nil {
				conn = c
			}
		}
		if conn != nil {
			var lag, retained *int64
			err := conn.QueryRow(ctx, `SELECT (pg_current_wal_lsn() - confirmed_flush_lsn)::int8, (pg_current_wal_lsn() - restart_lsn)::int8
				FROM pg_replication_slots WHERE slot_name = $1`, r.cfg.Slot).Scan(&lag, &retained)
			switch {
			case err == nil:
				if lag != nil {
					r.m.walLag.WithLabelValues(r.name).Set(float64(*lag))
				}
				if retained != nil {
					r.m.slotRetained.WithLabelValues(r.name).Set(float64(*retained))
				}
			case !errors.Is(err, pgx.ErrNoRows):
				conn.Close(context.WithoutCancel(ctx))
				conn = nil
			}
		}
		if clock.Sleep(ctx, r.clk, measureInterval) != nil {
			return
		}
	}
}
