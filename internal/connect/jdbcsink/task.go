package jdbcsink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/connect/avroconv"
)

const (
	// refreshInterval is how often the task looks for partitions of its
	// topics it does not consume yet (a topic created, partitions
	// added, a topic newly matching topics.regex).
	refreshInterval = 10 * time.Second
	// maxFencedInARow bounds the restarts after fencing without a batch
	// committed in between: past it the task fails, and the runner's
	// backoff takes over from a tight loop against another task.
	maxFencedInARow = 20
)

// errResync: the partitions to consume changed; start a new session.
var errResync = errors.New("jdbcsink: partitions changed")

// Task is a running sink (connect.Task).
type Task struct {
	cfg     *Config
	metrics *Metrics
}

var _ connect.Task = (*Task)(nil)

// Run writes the topics' records into the target until ctx ends. Each
// session reads the committed offsets from the target, consumes from
// there, and commits batch by batch; a batch fenced by another task
// starts a new session, any other error ends Run (the runner starts it
// again after a backoff).
func (t *Task) Run(ctx context.Context, env connect.Env) error {
	log := env.Logger
	if log == nil {
		log = slog.Default()
	}
	clk := clock.OrReal(env.Clock)
	t.metrics.declare(env.Name)
	tg, err := openTarget(ctx, t.cfg, env.Name)
	if err != nil {
		return ctxErr(ctx, err)
	}
	defer tg.close()
	if err := tg.ensureOffsetsTable(ctx); err != nil {
		return ctxErr(ctx, err)
	}
	s := &session{task: t, env: env, log: log, clk: clk, tg: tg}
	// The converters outlive sessions: their caches of registry
	// schemas stay warm across a fencing or a resubscription.
	if t.cfg.KeyAvro != nil {
		if s.keyAvro, err = avroconv.New(t.cfg.KeyAvro); err != nil {
			return err
		}
	}
	if t.cfg.ValueAvro != nil {
		if s.valueAvro, err = avroconv.New(t.cfg.ValueAvro); err != nil {
			return err
		}
	}
	fenced := 0
	for {
		committed, err := s.run(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, errFenced):
			t.metrics.fence(env.Name)
			if committed > 0 {
				fenced = 0
			}
			if fenced++; fenced > maxFencedInARow {
				return fmt.Errorf("jdbcsink: fenced %d times in a row: %w", fenced, err)
			}
			log.Info("jdbc sink: restarting from the target's offsets", "connector", env.Name, "reason", err)
			// Two tasks of the connector (briefly, while it moves)
			// would otherwise fence each other batch after batch:
			// the one fenced waits, longer each time and by a random
			// share, so the other drains what both were reading.
			wait := min(time.Duration(fenced)*25*time.Millisecond, time.Second)
			if err := clock.Sleep(ctx, clk, wait+rand.N(wait)); err != nil {
				return ctx.Err()
			}
		case errors.Is(err, errResync):
			log.Info("jdbc sink: partitions changed, resubscribing", "connector", env.Name)
		default:
			return err
		}
	}
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// session is one pass of a task: from the target's offsets until an
// error.
type session struct {
	task    *Task
	env     connect.Env
	log     *slog.Logger
	clk     clock.Clock
	tg      *target
	running bool
	// keyAvro, valueAvro: the AvroConverters, nil for JSON.
	keyAvro, valueAvro *avroconv.Converter
}

// run returns how many batches it committed, and why it ended.
func (s *session) run(ctx context.Context) (int, error) {
	cfg := s.task.cfg
	s.tg.tables = map[string]map[string]family{} // another task may have changed them
	stored, err := s.tg.readOffsets(ctx)
	if err != nil {
		return 0, err
	}
	var opts []kgo.Opt
	if s.env.Kafka != nil {
		opts = s.env.Kafka()
	}
	adm, err := kgo.NewClient(opts...)
	if err != nil {
		return 0, err
	}
	defer adm.Close()
	parts, err := partitions(ctx, kadm.NewClient(adm), cfg, s.env.Allowed)
	if err != nil {
		return 0, err
	}
	// expected: what the offsets table holds for every partition this
	// session consumes; each commit checks it under lock.
	expected := map[tp]int64{}
	consume := map[string]map[int32]kgo.Offset{}
	for _, p := range parts {
		if consume[p.topic] == nil {
			consume[p.topic] = map[int32]kgo.Offset{}
		}
		off, ok := stored[p]
		if ok {
			expected[p] = off
			consume[p.topic][p.partition] = kgo.NewOffset().At(off)
		} else {
			expected[p] = absent
			consume[p.topic][p.partition] = kgo.NewOffset().AtStart()
		}
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumePartitions(consume),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	if !s.running && s.env.Running != nil {
		s.running = true
		s.env.Running()
	}
	s.log.Info("jdbc sink: consuming", "connector", s.env.Name, "partitions", len(parts))

	dec := decoder{cfg: cfg, ctx: ctx, keyAvro: s.keyAvro, valueAvro: s.valueAvro}
	stable := map[tp]int64{} // last stable offsets seen in fetches, for lag
	nextRefresh := s.clk.Now().Add(refreshInterval)
	committed := 0
	for {
		if !s.clk.Now().Before(nextRefresh) {
			nextRefresh = s.clk.Now().Add(refreshInterval)
			now, err := partitions(ctx, kadm.NewClient(adm), cfg, s.env.Allowed)
			if err != nil {
				return committed, err
			}
			if !slices.Equal(now, parts) {
				return committed, errResync
			}
		}
		recs, err := s.collect(ctx, cl, stable, nextRefresh)
		if err != nil {
			return committed, err
		}
		if len(recs) == 0 {
			continue
		}
		start := s.clk.Now()
		next := map[tp]int64{}
		changes := make([]*change, 0, len(recs))
		for _, r := range recs {
			p := tp{r.Topic, r.Partition}
			// Assert what was read before writing it: records of a
			// partition come in order, from where the table says.
			want, ok := expected[p]
			if !ok {
				return committed, fmt.Errorf("jdbcsink: a record of %s/%d, which this task does not consume", p.topic, p.partition)
			}
			if prev, ok := next[p]; (ok && r.Offset < prev) || (want != absent && r.Offset < want) {
				return committed, fmt.Errorf("jdbcsink: %s/%d: offset %d read after %d", p.topic, p.partition, r.Offset, max(prev, want))
			}
			next[p] = r.Offset + 1
			ch, err := dec.decode(r)
			if errors.Is(err, errSkip) {
				continue
			}
			if err != nil {
				return committed, err
			}
			changes = append(changes, ch)
		}
		if err := s.tg.prepare(ctx, changes); err != nil {
			return committed, err
		}
		w, err := s.tg.commit(ctx, changes, expected, next)
		if err != nil {
			return committed, err
		}
		committed++
		maps.Copy(expected, next)
		s.task.metrics.committed(s.env.Name, w, s.clk.Now().Sub(start).Seconds())
		var lag int64
		for p, end := range stable {
			if off := expected[p]; off != absent && end > off {
				lag += end - off
			} else if off == absent {
				lag += end
			}
		}
		s.task.metrics.setLag(s.env.Name, lag)
	}
}

// collect polls up to batch.size records: it waits for a first record
// (until refresh is due), then takes what the client has already
// fetched, without waiting for more. A batch is as large as what came
// in while the last one was written: one record when the sink keeps up
// (the lowest latency), batch.size when it is behind (the fewest
// transactions), with no timer between.
func (s *session) collect(ctx context.Context, cl *kgo.Client, stable map[tp]int64, refresh time.Time) ([]*kgo.Record, error) {
	limit := s.task.cfg.BatchSize
	var recs []*kgo.Record
	deadline := refresh
	for len(recs) < limit {
		wait := deadline.Sub(s.clk.Now())
		if wait <= 0 {
			break
		}
		pctx, cancel := context.WithCancel(ctx)
		timer := s.clk.AfterFunc(wait, cancel)
		fs := cl.PollRecords(pctx, limit-len(recs))
		timer.Stop()
		timedOut := pctx.Err() != nil
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := fetched(fs, stable); err != nil {
			return nil, err
		}
		recs = append(recs, fs.Records()...)
		if timedOut || len(recs) > 0 {
			break
		}
	}
	// What is buffered already: a nil context polls without waiting.
	for len(recs) > 0 && len(recs) < limit {
		fs := cl.PollRecords(nil, limit-len(recs)) //nolint:staticcheck // nil: return what is buffered, kgo's documented form
		if err := fetched(fs, stable); err != nil {
			return nil, err
		}
		got := fs.Records()
		if len(got) == 0 {
			break
		}
		recs = append(recs, got...)
	}
	return recs, nil
}

// fetched notes the partitions' last stable offsets (for the lag) and
// returns the fetches' first error but a cancelled poll's.
func fetched(fs kgo.Fetches, stable map[tp]int64) error {
	var ferr error
	fs.EachError(func(t string, p int32, err error) {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && ferr == nil {
			ferr = fmt.Errorf("jdbcsink: fetch %s/%d: %w", t, p, err)
		}
	})
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if p.LastStableOffset >= 0 {
			stable[tp{p.Topic, p.Partition}] = p.LastStableOffset
		}
	})
	return ferr
}

// partitions lists the partitions of the configured topics (those of
// topics.regex: every topic that matches, but internal ones), sorted.
// A named topic that does not exist yet has none. The connector's owner
// must be allowed to READ each (allowed: connect.Env.Allowed): a named
// topic it may not read fails the task, one matching the regex is left
// out, as Kafka's Metadata leaves out what a client may not describe.
func partitions(ctx context.Context, adm *kadm.Client, cfg *Config, allowed func(acl.Operation, string) error) ([]tp, error) {
	var td kadm.TopicDetails
	var err error
	if cfg.TopicsRegex != nil {
		td, err = adm.ListTopics(ctx)
	} else {
		td, err = adm.ListTopics(ctx, cfg.Topics...)
	}
	if err != nil {
		return nil, fmt.Errorf("jdbcsink: list topics: %w", err)
	}
	var out []tp
	for name, d := range td {
		if d.Err != nil || d.IsInternal || strings.HasPrefix(name, "__") {
			continue
		}
		if cfg.TopicsRegex != nil && !cfg.TopicsRegex.MatchString(name) {
			continue
		}
		if err := allowed(kmsg.ACLOperationRead, name); err != nil {
			if cfg.TopicsRegex != nil {
				continue
			}
			return nil, fmt.Errorf("jdbcsink: %w", err)
		}
		for p := range d.Partitions {
			out = append(out, tp{name, p})
		}
	}
	slices.SortFunc(out, func(a, b tp) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.partition - b.partition)
	})
	return out, nil
}
