package pgsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/connect/avroconv"
)

const (
	// txnTimeout is the Kafka transaction timeout: Kafka's largest
	// (transaction.max.timeout.ms), since one transaction holds a
	// whole PostgreSQL transaction, however large.
	txnTimeout = 15 * time.Minute
	// maxBufferedRecords and maxBufferedBytes bound what the producer
	// holds before Produce waits: a large transaction streams through.
	maxBufferedRecords = 10_000
	maxBufferedBytes   = 64 << 20
	// defaultSnapshotTxnRecords is how many snapshot rows one Kafka
	// transaction carries.
	defaultSnapshotTxnRecords = 100_000
	// measureInterval is how often the slot's lag is measured.
	measureInterval = 5 * time.Second
	// slotBusyRetries and slotBusyWait bound how long a start waits for
	// an earlier owner to let go of the slot before failing (the
	// runner then retries with its backoff).
	slotBusyRetries = 15
	slotBusyWait    = time.Second
	// slotTerminateAfter is the try after which the walsender holding
	// the slot is terminated (slotBusy).
	slotTerminateAfter = 5
)

// Task is a running PostgreSQL source.
type Task struct {
	cfg     *Config
	metrics *Metrics
}

var _ connect.Task = (*Task)(nil)

// run is one Run's state.
type run struct {
	cfg    *Config
	m      *Metrics
	env    connect.Env
	name   string
	log    *slog.Logger
	clk    clock.Clock
	prod   *kgo.Client
	adm    *kadm.Client
	enc    *encoder
	okey   []byte
	topics map[string]bool
	// reported: Env.Running was called.
	reported bool
	produce  struct {
		mu  sync.Mutex
		err error
	}
}

// Run captures changes until ctx ends or something fails. It keeps
// nothing in env.Dir: where it resumes is the committed offset in
// OffsetsTopic and the slot on the server.
func (t *Task) Run(ctx context.Context, env connect.Env) error {
	r := &run{cfg: t.cfg, m: t.metrics, env: env, name: env.Name, log: env.Logger, clk: clock.OrReal(env.Clock),
		enc:    &encoder{prefix: t.cfg.TopicPrefix, db: t.cfg.DBName, keySchemas: t.cfg.KeySchemas, valueSchemas: t.cfg.ValueSchemas},
		okey:   offsetKey(env.Name, t.cfg.TopicPrefix),
		topics: map[string]bool{}}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.log = r.log.With("connector", env.Name)
	t.metrics.declare(env.Name)
	var err error
	if t.cfg.KeyAvro != nil {
		if r.enc.keyAvro, err = avroconv.New(t.cfg.KeyAvro); err != nil {
			return err
		}
	}
	if t.cfg.ValueAvro != nil {
		if r.enc.valueAvro, err = avroconv.New(t.cfg.ValueAvro); err != nil {
			return err
		}
	}
	err = r.run(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func (r *run) run(ctx context.Context) error {
	opts := r.env.Kafka()
	prod, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...),
		kgo.TransactionalID(TransactionalID(r.name)),
		kgo.TransactionTimeout(txnTimeout),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(maxBufferedRecords),
		kgo.MaxBufferedBytes(maxBufferedBytes),
		kgo.ProducerLinger(5*time.Millisecond))...)
	if err != nil {
		return err
	}
	defer prod.Close()
	r.prod, r.adm = prod, kadm.NewClient(prod)
	// InitProducerID: any earlier owner is fenced from here on and its
	// open transaction aborted, so the offset read next is final until
	// this task commits.
	if _, _, err := prod.ProducerID(ctx); err != nil {
		return fmt.Errorf("transactional id %s: %w", TransactionalID(r.name), err)
	}
	if err := ensureOffsetsTopic(ctx, r.adm); err != nil {
		return err
	}
	off, hasOff, err := readOffset(ctx, opts, r.okey)
	if err != nil {
		return err
	}
	app := "strand-connect-" + r.name
	conn, err := r.cfg.connect(ctx, app)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := r.ensurePublication(ctx, conn); err != nil {
		return err
	}
	repl, err := r.cfg.connectReplication(ctx, app)
	if err != nil {
		return err
	}
	defer repl.Close(context.WithoutCancel(ctx))
	slot, err := slotInfo(ctx, conn, r.cfg.Slot)
	if err != nil {
		return err
	}
	snapshot := r.cfg.SnapshotMode == SnapshotInitial && (!hasOff || off.Snapshot)
	var start uint64
	switch {
	case snapshot:
		if slot != nil {
			// No snapshot completed: nothing streamed from this slot
			// was committed, and a new slot's exported snapshot is the
			// only consistent start. Debezium too starts a snapshot
			// interrupted half-way again from its beginning.
			if err := r.dropSlot(ctx, conn, repl); err != nil {
				return err
			}
		}
		r.running()
		if start, err = r.snapshot(ctx, conn, repl); err != nil {
			return err
		}
	case hasOff:
		if slot == nil {
			return fmt.Errorf("replication slot %q is missing: the changes after LSN %s cannot be read; drop the connector's offsets (or the connector) to snapshot again",
				r.cfg.Slot, pglogrepl.LSN(off.LSN))
		}
		start = off.LSN
	default:
		if slot == nil {
			res, err := pglogrepl.CreateReplicationSlot(ctx, repl, r.cfg.Slot, "pgoutput",
				pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT"})
			if err != nil {
				return fmt.Errorf("creating replication slot %q: %w", r.cfg.Slot, err)
			}
			lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
			if err != nil {
				return err
			}
			start = uint64(lsn)
			r.log.Info("replication slot created", "slot", r.cfg.Slot, "consistent_point", res.ConsistentPoint)
		} else {
			start = slot.confirmed
		}
	}
	if !hasOff || off.Snapshot {
		off = Offset{LSN: start, SnapshotCompleted: true}
	}
	r.running()
	return r.stream(ctx, conn, repl, off)
}

func (r *run) running() {
	if !r.reported && r.env.Running != nil {
		r.env.Running()
	}
	r.reported = true
}

// slotState is a replication slot as pg_replication_slots shows it.
type slotState struct {
	plugin    string
	active    bool
	confirmed uint64
}

func slotInfo(ctx context.Context, conn *pgx.Conn, slot string) (*slotState, error) {
	var s slotState
	var plugin *string
	var lsn *pglogrepl.LSN
	err := conn.QueryRow(ctx, `SELECT plugin, active, confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1`, slot).
		Scan(&plugin, &s.active, &lsn)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replication slot %q: %w", slot, err)
	}
	if plugin == nil || *plugin != "pgoutput" {
		return nil, fmt.Errorf("replication slot %q exists and is not a pgoutput logical slot", slot)
	}
	s.plugin = *plugin
	if lsn != nil {
		s.confirmed = uint64(*lsn)
	}
	return &s, nil
}

func (r *run) dropSlot(ctx context.Context, conn *pgx.Conn, repl *pgconn.PgConn) error {
	for i := 0; ; i++ {
		err := pglogrepl.DropReplicationSlot(ctx, repl, r.cfg.Slot, pglogrepl.DropReplicationSlotOptions{})
		if err == nil {
			r.log.Info("replication slot dropped to snapshot again", "slot", r.cfg.Slot)
			return nil
		}
		if pgCode(err) != "55006" || i >= slotBusyRetries {
			return fmt.Errorf("dropping replication slot %q: %w", r.cfg.Slot, err)
		}
		if err := r.slotBusy(ctx, conn, i, err); err != nil {
			return err
		}
	}
}

// ensurePublication creates the publication if missing, per
// publication.autocreate.mode.
func (r *run) ensurePublication(ctx context.Context, conn *pgx.Conn) error {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, r.cfg.Publication).Scan(&exists); err != nil {
		return fmt.Errorf("publication %q: %w", r.cfg.Publication, err)
	}
	if exists {
		return nil
	}
	var stmt string
	switch r.cfg.PublicationMode {
	case "disabled":
		return fmt.Errorf("publication %q does not exist and %s is disabled", r.cfg.Publication, cfgPublicationMode)
	case "all_tables":
		stmt = "CREATE PUBLICATION " + quoteIdent(r.cfg.Publication) + " FOR ALL TABLES"
	case "filtered":
		rows, err := conn.Query(ctx, `SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%' ORDER BY 1, 2`)
		if err != nil {
			return err
		}
		var names []string
		for rows.Next() {
			var s, t string
			if err := rows.Scan(&s, &t); err != nil {
				rows.Close()
				return err
			}
			if r.cfg.Captured(s, t) {
				names = append(names, quoteIdent(s)+"."+quoteIdent(t))
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(names) == 0 {
			return fmt.Errorf("publication %q: no table matches %s", r.cfg.Publication, cfgTableInclude)
		}
		stmt = "CREATE PUBLICATION " + quoteIdent(r.cfg.Publication) + " FOR TABLE " + joinComma(names)
	}
	if _, err := conn.Exec(ctx, stmt); err != nil && pgCode(err) != "42710" { // duplicate_object: created meanwhile
		return fmt.Errorf("creating publication %q: %w", r.cfg.Publication, err)
	}
	r.log.Info("publication created", "publication", r.cfg.Publication, "mode", r.cfg.PublicationMode)
	return nil
}

func joinComma(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ", "
		}
		out += s
	}
	return out
}

// ensureTopic creates a table's topic if it is missing.
func (r *run) ensureTopic(ctx context.Context, topic string) error {
	if r.topics[topic] {
		return nil
	}
	// The owner must be able to write the table's topic, and create
	// it: the task's own client may do anything.
	for _, op := range []acl.Operation{kmsg.ACLOperationWrite, kmsg.ACLOperationCreate} {
		if err := r.env.Allowed(op, topic); err != nil {
			return err
		}
	}
	res, err := r.adm.CreateTopic(ctx, r.cfg.TopicPartitions, -1, nil, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("topic %s: %w", topic, err)
	}
	r.topics[topic] = true
	return nil
}

// promise collects the first produce error of the open transaction.
func (r *run) promise(_ *kgo.Record, err error) {
	if err != nil {
		r.produce.mu.Lock()
		if r.produce.err == nil {
			r.produce.err = err
		}
		r.produce.mu.Unlock()
	}
}

func (r *run) produceErr() error {
	r.produce.mu.Lock()
	defer r.produce.mu.Unlock()
	return r.produce.err
}

// commit writes off to the offsets topic in the open transaction and
// commits it. Any error leaves the outcome to the next start, which
// reads the committed offset: nothing is assumed.
func (r *run) commit(ctx context.Context, off Offset) error {
	val, err := json.Marshal(off)
	if err != nil {
		return err
	}
	r.prod.Produce(ctx, &kgo.Record{Topic: OffsetsTopic, Key: r.okey, Value: val}, r.promise)
	ferr := r.prod.Flush(ctx)
	if err := errors.Join(ferr, r.produceErr()); err != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_ = r.prod.AbortBufferedRecords(actx)
		_ = r.prod.EndTransaction(actx, kgo.TryAbort)
		cancel()
		return fmt.Errorf("kafka transaction: %w", err)
	}
	if err := r.prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("kafka transaction commit: %w", err)
	}
	r.m.txns.WithLabelValues(r.name).Inc()
	return nil
}
