package share

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/partwatch"
)

// Meta is what the share path needs of the metadata database
// (*replica.Replica): its local View and proposals.
type Meta interface {
	meta.Viewer
	ProposeBatch(ctx context.Context, cmds []meta.Command) ([]meta.Result, error)
}

// Fetcher reads committed batches (*fetch.Reader).
type Fetcher interface {
	ReadUpTo(ctx context.Context, view *meta.View, topicID meta.TopicID, partition int32, offset int64, maxBytes int32, upTo int64) (fetch.FetchResult, error)
}

// Notifier wakes long polls on partitions (*replica.Replica): a share
// state's change marks its partition changed too (meta/changes.go), so a
// release on another agent wakes a waiting ShareFetch here.
type Notifier interface {
	Watch(parts []meta.PartitionRef) *partwatch.Watch
}

// Options configures a Server.
type Options struct {
	Meta    Meta
	Fetch   Fetcher
	Changes Notifier
	// Configs gives each group's share configuration; nil is
	// DefaultConfigs.
	Configs Configs
	// Clock is the agent's clock (long polls, metrics); nil is the real
	// one. Lock expiry is decided by the log clock, never by this one.
	Clock clock.Clock
	// MaxSessions bounds the share sessions; 0 is DefaultMaxSessions.
	MaxSessions int
	// Metrics, if set, counts what the server does.
	Metrics *Metrics
	Log     *slog.Logger
}

// Server serves ShareFetch and ShareAcknowledge for one agent. Safe for
// concurrent use.
type Server struct {
	meta     Meta
	fetch    Fetcher
	changes  Notifier
	configs  Configs
	clock    clock.Clock
	metrics  *Metrics
	log      *slog.Logger
	sessions *sessions

	// releases are the ShareReleases of dropped connections, proposed
	// in the background; Close waits for them.
	releases sync.WaitGroup
	ctx      context.Context
	cancel   context.CancelFunc
}

// NewServer returns a Server; Close stops it.
func NewServer(o Options) *Server {
	if o.Configs == nil {
		o.Configs = DefaultConfigs{}
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{meta: o.Meta, fetch: o.Fetch, changes: o.Changes, configs: o.Configs, clock: clock.OrReal(o.Clock),
		metrics: o.Metrics, log: o.Log, sessions: newSessions(o.MaxSessions), ctx: ctx, cancel: cancel}
	if s.metrics != nil {
		s.metrics.sessions = s.sessions.len
	}
	return s
}

// Close waits for the releases of dropped connections under way, and
// cancels those still waiting after ctx ends.
func (s *Server) Close(ctx context.Context) {
	done := make(chan struct{})
	go func() { s.releases.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.cancel()
		<-done
	}
	s.cancel()
}

// releaseTimeout bounds the ShareRelease proposed for a dropped
// connection: if it fails the locks end by themselves.
const releaseTimeout = 10 * time.Second

// ConnClosed releases the records of the share sessions opened on
// connection conn, as Kafka does for a closed connection: a consumer
// killed with -9 has its records redelivered at once, not after the
// lock. It returns at once; the release goes through the log after.
func (s *Server) ConnClosed(conn uint64) {
	closed := s.sessions.closeConn(conn)
	if len(closed) == 0 {
		return
	}
	s.releases.Add(1)
	go func() {
		defer s.releases.Done()
		ctx, cancel := context.WithTimeout(s.ctx, releaseTimeout)
		defer cancel()
		cmds := make([]meta.Command, 0, len(closed))
		for k, ss := range closed {
			if len(ss.parts) == 0 {
				continue
			}
			cfg, err := s.config(k.group)
			if err != nil {
				continue
			}
			cmds = append(cmds, meta.ShareRelease{Group: k.group, Member: k.member, DeliveryLimit: int32(cfg.DeliveryLimit), Partitions: refsOf(ss.parts)})
		}
		if len(cmds) == 0 {
			return
		}
		res, err := s.meta.ProposeBatch(ctx, sortedReleases(cmds))
		if err != nil {
			s.log.Warn("share: releasing a dropped connection's records failed; their locks end by themselves", "conn", conn, "err", err)
			return
		}
		s.countResults(res)
	}()
}

func refsOf(parts []meta.PartitionRef) []meta.SharePartitionRef {
	out := make([]meta.SharePartitionRef, len(parts))
	for i, p := range parts {
		out[i] = meta.SharePartitionRef{TopicID: p.TopicID, Partition: p.Partition}
	}
	return out
}

// sortedReleases orders the commands by group and member, so the log
// entry does not depend on map order (apply would not care; a reader
// of the log would).
func sortedReleases(cmds []meta.Command) []meta.Command {
	less := func(a, b meta.ShareRelease) bool {
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Member < b.Member
	}
	for i := 1; i < len(cmds); i++ {
		for j := i; j > 0 && less(cmds[j].(meta.ShareRelease), cmds[j-1].(meta.ShareRelease)); j-- {
			cmds[j], cmds[j-1] = cmds[j-1], cmds[j]
		}
	}
	return cmds
}

// config is the group's share config, checked.
func (s *Server) config(group string) (Config, error) {
	cfg, err := s.configs.ShareConfig(group)
	if err != nil {
		return Config{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// propose proposes cmds in one log entry. A log below metadata level 9
// is UNSUPPORTED_VERSION: share groups need every agent to read their
// commands (strand features upgrade).
func (s *Server) propose(ctx context.Context, cmds []meta.Command) ([]meta.Result, error) {
	if len(cmds) == 0 {
		return nil, nil
	}
	res, err := s.meta.ProposeBatch(ctx, cmds)
	if errors.Is(err, meta.ErrNotAtLevel) {
		return nil, fmt.Errorf("%w: share groups need %s %d (strand features upgrade)", kerr.UnsupportedVersion, meta.FeatureMetadata, meta.LevelShareGroups)
	}
	if err == nil {
		s.countResults(res)
	}
	return res, err
}

func (s *Server) countResults(res []meta.Result) {
	if s.metrics == nil {
		return
	}
	for _, r := range res {
		for _, g := range r.ShareGrants {
			s.metrics.acquired.Add(float64(g.Last - g.First + 1))
		}
		if r.ShareArchived > 0 {
			s.metrics.archived.Add(float64(r.ShareArchived))
		}
		if r.ShareLockTimeouts > 0 {
			s.metrics.lockTimeouts.Add(float64(r.ShareLockTimeouts))
		}
		if r.ShareReleased > 0 {
			s.metrics.released.Add(float64(r.ShareReleased))
		}
	}
}

// errCode is the Kafka error code of err.
func errCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return kerr.RequestTimedOut.Code
	}
	return kerr.UnknownServerError.Code
}
