package agent

import (
	"context"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/offsetstopic"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
)

// WaitSnapshots waits until the agent has taken n snapshots, periodic or
// requested, and returns the newest.
func (a *Agent) WaitSnapshots(ctx context.Context, n int) (SnapshotResult, error) {
	return a.snapshots.waitTaken(ctx, n)
}

// SetConnectClasses adds connector classes to the agent's, for tests
// with a fake class.
func SetConnectClasses(cfg *Config, cs ...connect.Class) { cfg.testing.connectClasses = cs }

// SetExit makes a fail-stop call exit instead of os.Exit.
func SetExit(cfg *Config, exit func(code int)) { cfg.testing.exit = exit }

// SetLogFS makes the file loglets write through fs.
func SetLogFS(cfg *Config, fs filelog.FS) { cfg.testing.logFS = fs }

// SetMetaFS makes Pebble keep the metadata copy in fs.
func SetMetaFS(cfg *Config, fs vfs.FS) { cfg.testing.metaFS = fs }

// SetClock gives the agent clk instead of the wall clock (see the package
// doc for what takes it).
func SetClock(cfg *Config, clk clock.Clock) { cfg.testing.clock = clk }

// ProbeFeatures is the agent's kafka.FeatureProber.
var ProbeFeatures = featureProber{}.SupportedFeatures

// MetricsRegistry is the agent's Prometheus registry, for the metrics
// reference (docs/metrics.md) and its test.
func (a *Agent) MetricsRegistry() *prometheus.Registry { return a.metrics.reg }

// SyncConsumerOffsets waits until the __consumer_offsets records of every
// change this agent noted so far are written.
func (a *Agent) SyncConsumerOffsets(ctx context.Context) error { return a.offsets.Load().Sync(ctx) }

// SetOffsetsProducer wraps the produce path of the __consumer_offsets
// records.
func SetOffsetsProducer(cfg *Config, wrap func(offsetstopic.Producer) offsetstopic.Producer) {
	cfg.testing.offsetsProducer = wrap
}

// ConsumerOffsetsResynced is closed once the agent rewrote, at start,
// the __consumer_offsets records of the groups it coordinates.
func (a *Agent) ConsumerOffsetsResynced() <-chan struct{} { return a.offsetsResynced }

// CheckRetention runs a retention check now.
func (a *Agent) CheckRetention(ctx context.Context) (int, error) { return a.retention.Check(ctx) }

// SweepTransactions runs the transaction timeout sweep now.
func (a *Agent) SweepTransactions(ctx context.Context) error { return a.txns.Sweep(ctx) }

// CollectGarbage runs a garbage collection step now.
func (a *Agent) CollectGarbage(ctx context.Context) error {
	_, err := a.collector.Step(ctx)
	return err
}

// SetAppliedHook runs f in the apply loop after each batch that holds
// the agent's own entries: blocking in f stalls its apply.
func SetAppliedHook(cfg *Config, f func()) { cfg.testing.applied = f }

// ClockHeld reports whether the agent stands aside from decisions by
// time, its clock disagreeing with the log's (clockskew.go).
func (a *Agent) ClockHeld() bool { return a.clock.hold() }

// RedactArgs is redactArgs, what /debug/pprof/cmdline shows of os.Args.
var RedactArgs = redactArgs
