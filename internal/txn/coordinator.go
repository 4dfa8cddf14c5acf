package txn

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
)

// Metadata is what the coordinator needs of the metadata database.
// *replica.Replica implements it over Pebble and the shared log;
// metatest.DB in memory, for tests.
type Metadata interface {
	// View (meta.Viewer) is a snapshot of the local copy; the caller
	// closes it.
	meta.Viewer
	// ProposeBatch proposes commands that land in one log entry and
	// returns their results once applied locally. Its errors are
	// replica's (ErrClosed, ErrAmbiguous, ErrTooLarge) or the context's.
	ProposeBatch(ctx context.Context, cmds []meta.Command) ([]meta.Result, error)
	// Sync returns once the local copy has applied everything appended
	// to the log before the call.
	Sync(ctx context.Context) error
}

var _ Metadata = (*replica.Replica)(nil)

// Placement says which agent coordinates a transactional id.
// placement.Ring implements it; it must agree with the FindCoordinator
// answers clients get.
type Placement interface {
	Owner(key string) int32
}

// DefaultSweepInterval is how often the sweep looks for transactions
// that timed out or transactional ids that expired. Kafka checks every
// 10 s (transaction.abort.timed.out.transaction.cleanup.interval.ms);
// the check here is a local read, so it can run more often and abort a
// hung transaction closer to its timeout.
const DefaultSweepInterval = time.Second

// SyncTimeout bounds the Sync before a read of coordinator state, which
// carries no timeout of its own: past it the client gets
// REQUEST_TIMED_OUT and retries.
const SyncTimeout = 10 * time.Second

// Config configures a Coordinator.
type Config struct {
	// Meta is the agent's metadata replica.
	Meta Metadata
	// NodeID is this agent's broker id.
	NodeID int32
	// Placement maps transactional ids to agents; nil means this agent
	// coordinates every id.
	Placement Placement
	// SweepInterval is the period of the timeout sweep; zero means
	// DefaultSweepInterval, negative no sweep (a test calls Sweep).
	SweepInterval time.Duration
	// ClockOff, when set and true, says this agent's clock disagrees
	// with the log's: the sweep then judges timeouts by the log clock
	// alone. It must not stop: the transactions this agent coordinates
	// would stay open, and hold every read_committed consumer of their
	// partitions, until the clock was fixed.
	ClockOff func() bool
	// Clock is the sweep's clock, for its period and for the time it
	// judges timeouts by; nil means the wall clock.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Coordinator is the transaction coordinator of one agent. It is safe
// for concurrent use.
type Coordinator struct {
	cfg    Config
	log    *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a coordinator and starts its sweep. Close stops it.
func New(cfg Config) (*Coordinator, error) {
	if cfg.Meta == nil {
		return nil, errors.New("txn: Config.Meta is nil")
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{cfg: cfg, log: cfg.Logger, cancel: cancel}
	if cfg.SweepInterval > 0 {
		c.wg.Add(1)
		go c.runSweep(ctx)
	}
	return c, nil
}

// Close stops the sweep and waits for it; a sweep's proposal in flight
// is cancelled. Close the coordinator before its Meta.
func (c *Coordinator) Close() error {
	c.cancel()
	c.wg.Wait()
	return nil
}

// Coordinator returns the node id of the agent that coordinates the
// transactional id.
func (c *Coordinator) Coordinator(id string) int32 {
	if c.cfg.Placement == nil {
		return c.cfg.NodeID
	}
	return c.cfg.Placement.Owner(id)
}

func (c *Coordinator) owns(id string) bool { return c.Coordinator(id) == c.cfg.NodeID }

// propose proposes one command and returns its result, or the code to
// answer when there is none.
func (c *Coordinator) propose(ctx context.Context, cmd meta.Command) (meta.Result, *kerr.Error) {
	res, e := c.proposeAll(ctx, cmd)
	if e != nil {
		return meta.Result{}, e
	}
	return res[0], nil
}

// proposeAll proposes commands in one log entry; on success there is a
// result per command.
func (c *Coordinator) proposeAll(ctx context.Context, cmds ...meta.Command) ([]meta.Result, *kerr.Error) {
	res, err := c.cfg.Meta.ProposeBatch(ctx, cmds)
	switch {
	case err != nil:
		return nil, proposeErrCode(err)
	case len(res) != len(cmds):
		return nil, kerr.UnknownServerError
	}
	return res, nil
}

// proposeErrCode maps a proposal with no result to the code a client can
// act on (see the package doc).
func proposeErrCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, replica.ErrClosed), errors.Is(err, replica.ErrHalted):
		// This agent is stopping (a halted copy exits, agent.Run): the
		// client looks for the coordinator again.
		return kerr.CoordinatorNotAvailable
	case errors.Is(err, replica.ErrTooLarge):
		return kerr.InvalidRequest
	case errors.Is(err, replica.ErrAmbiguous), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut
	}
	return kerr.UnknownServerError
}

// syncedView syncs the local copy with the log and returns a View of it
// (the caller closes it) and its log clock. On failure the view is nil
// and the error is closed (when this agent is stopping, the code that
// sends the client elsewhere), REQUEST_TIMED_OUT or
// UNKNOWN_SERVER_ERROR.
func (c *Coordinator) syncedView(ctx context.Context, closed *kerr.Error) (*meta.View, int64, *kerr.Error) {
	ctx, cancel := context.WithTimeout(ctx, SyncTimeout)
	defer cancel()
	if err := c.cfg.Meta.Sync(ctx); err != nil {
		switch {
		case errors.Is(err, replica.ErrClosed), errors.Is(err, replica.ErrHalted):
			return nil, 0, closed
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			return nil, 0, kerr.RequestTimedOut
		}
		return nil, 0, kerr.UnknownServerError
	}
	view := c.cfg.Meta.View()
	now, err := view.LogClock()
	if err != nil {
		view.Close()
		return nil, 0, kerr.UnknownServerError
	}
	return view, now, nil
}

// fill sets every code to code.
func fill(codes []int16, code int16) {
	for i := range codes {
		codes[i] = code
	}
}
