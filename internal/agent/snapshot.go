package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog"
)

// SnapshotPrefix is where in the object store the agents keep the
// metadata snapshots (replica.Replica.Snapshot's layout: manifests under
// meta/snap/, files under meta/sst/ and meta/aux/). Data objects live
// under data/, so the two never meet. Every agent of a cluster uses the
// same prefix: a wiped agent restores what any of them took.
const SnapshotPrefix = "meta/"

// snapshotTimeout bounds one snapshot and trim, so a hung object store
// stalls the loop for at most this long before the next tick retries.
const snapshotTimeout = 10 * time.Minute

// errStopping: the agent is shutting down and takes no more snapshots.
var errStopping = errors.New("agent: shutting down")

// SnapshotResult is what one snapshot-and-trim did.
type SnapshotResult struct {
	// Snapshot is the snapshot this agent took (or found already there,
	// when nothing was applied since the last one).
	Snapshot replica.SnapshotInfo
	// TrimPoint is the log's trim point after trimming: the position of
	// the newest snapshot in the store, or lower if another live agent
	// reported a lower applied position (HeldBy).
	TrimPoint sharedlog.Pos
	// HeldBy is the live agent whose applied position kept the trim
	// below the newest snapshot, nil if none did.
	HeldBy *meta.AgentInfo
	// GC is what the snapshot GC after the trim deleted; GCErr is why
	// it stopped, if it failed (the snapshot stands, and the next GC
	// deletes what this one left).
	GC    replica.GCResult
	GCErr error
	// Duration covers the snapshot, the trim and the GC.
	Duration time.Duration
}

// snapshotter takes the agent's metadata snapshots and trims the log
// below them, every interval and on request (POST /v1/snapshot).
//
// Trimming must not cut off another live agent: one that has not applied
// up to the trim point halts with sharedlog.ErrTrimmed while serving.
// Every agent's lease renewal reports its applied position (cluster.go),
// so the trim goes below the lower of the newest snapshot and the lowest
// applied position among the other live agents (meta.View's
// LowestLiveApplied). This agent's own position needs no heartbeat: it
// has applied at least up to its own snapshot. An agent whose lease ran
// out by the log clock no longer holds the trim back, and restores a
// snapshot at its next start if it was trimmed out.
type snapshotter struct {
	replica *replica.Replica
	log     *sharedlog.VirtualLog
	store   objstore.Store
	// self is this agent's id in the agent table, skipped when looking
	// for the lowest applied position.
	self     string
	interval time.Duration // <= 0: no loop, snapshots on request only
	// keep is how many of the newest snapshots the GC after each
	// snapshot leaves in the store.
	keep    int
	metrics *metrics
	logger  *slog.Logger

	// ctx is canceled by stop; it aborts a snapshot in flight.
	ctx    context.Context
	cancel context.CancelFunc
	loop   sync.WaitGroup

	// runMu is held across a snapshot: one runs at a time (a second
	// would checkpoint the same state), and stop waits for the one in
	// flight, since replica.Replica.Snapshot must return before Close.
	runMu sync.Mutex

	mu struct {
		sync.Mutex
		stopped bool
		// last is the newest result; changed is closed and replaced
		// after each one.
		last    SnapshotResult
		taken   int
		changed chan struct{}
	}
}

func newSnapshotter(r *replica.Replica, log *sharedlog.VirtualLog, store objstore.Store, self string, interval time.Duration, keep int, m *metrics, logger *slog.Logger) *snapshotter {
	s := &snapshotter{replica: r, log: log, store: store, self: self, interval: interval, keep: keep, metrics: m, logger: logger}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.changed = make(chan struct{})
	if interval > 0 {
		s.loop.Go(s.runLoop)
	}
	return s
}

func (s *snapshotter) runLoop() {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		last, taken := s.mu.last.Snapshot.Pos, s.mu.taken
		s.mu.Unlock()
		if taken > 0 && s.replica.NextToApply() == last {
			continue // nothing applied since the last snapshot
		}
		ctx, cancel := context.WithTimeout(s.ctx, snapshotTimeout)
		_, err := s.run(ctx)
		cancel()
		if err != nil && s.ctx.Err() == nil {
			s.logger.Warn("periodic snapshot failed; retrying at the next interval", "err", err, "interval", s.interval)
		}
	}
}

// run takes a snapshot and trims the log below the newest snapshot, or
// below the other live agents' applied positions if one is lower. Then
// it deletes the snapshots older than the newest keep. Every agent
// collects after its own snapshots: collections may run at once, on any
// agent, and deleting what is already gone is not an error
// (replica.CollectSnapshots).
func (s *snapshotter) run(ctx context.Context) (SnapshotResult, error) {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	s.mu.Lock()
	stopped := s.mu.stopped
	s.mu.Unlock()
	if stopped {
		return SnapshotResult{}, errStopping
	}
	// A request's ctx ends with its connection; stop must abort it too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()

	start := time.Now()
	info, err := s.replica.Snapshot(ctx, s.store, SnapshotPrefix)
	if err != nil {
		return SnapshotResult{}, fmt.Errorf("snapshot: %w", err)
	}
	bound, holder, held, err := s.trimBound(ctx)
	if err != nil {
		return SnapshotResult{}, fmt.Errorf("trim after snapshot at %d: %w", info.Pos, err)
	}
	newest, before, err := replica.TrimLog(ctx, s.log, s.store, SnapshotPrefix, bound)
	if err != nil {
		return SnapshotResult{}, fmt.Errorf("trim after snapshot at %d: %w", info.Pos, err)
	}
	res := SnapshotResult{Snapshot: info, TrimPoint: s.log.Chain().TrimPoint}
	res.GC, res.GCErr = s.replica.CollectSnapshots(ctx, s.store, SnapshotPrefix, s.keep)
	s.metrics.snapGCManifests.Add(float64(res.GC.ManifestsDeleted))
	s.metrics.snapGCFiles.Add(float64(res.GC.FilesDeleted))
	s.metrics.snapGCBytes.Add(float64(res.GC.BytesDeleted))
	res.Duration = time.Since(start)
	attrs := []any{"pos", info.Pos, "key", info.Key, "files", info.Files, "bytes", info.Bytes,
		"uploaded_files", info.UploadedFiles, "uploaded_bytes", info.UploadedBytes,
		"trim_point", res.TrimPoint, "gc_manifests_deleted", res.GC.ManifestsDeleted,
		"gc_files_deleted", res.GC.FilesDeleted, "gc_bytes_deleted", res.GC.BytesDeleted,
		"gc_deferred", res.GC.Deferred, "duration", res.Duration}
	if held && before < newest.Pos {
		res.HeldBy = &holder
		attrs = append(attrs, "held_by_node", holder.NodeID, "held_by_agent", holder.AgentID, "held_at", holder.Applied)
	}
	if res.GCErr != nil {
		s.logger.Warn("snapshot GC failed; the next one deletes what it left", "err", res.GCErr, "keep", s.keep)
	}
	s.logger.Info("metadata snapshot taken; log trimmed", attrs...)

	s.mu.Lock()
	s.mu.last = res
	s.mu.taken++
	ch := s.mu.changed
	s.mu.changed = make(chan struct{})
	s.mu.Unlock()
	close(ch)
	return res, nil
}

// trimBound returns how far the log may be trimmed for the live agents:
// the lowest applied position the other live agents report, or this
// copy's own applied position if that is lower or no other agent is live.
// It also returns the other agent that set the bound, with true, if one
// did. It syncs first, so that every heartbeat appended before the trim
// counts, a newly started agent's included, and liveness is judged by the
// newest log clock.
//
// The own position matters when the newest snapshot in the store is
// another agent's, taken past where this copy is, by an agent that no
// longer holds a lease; otherwise the snapshot or the others bound it.
func (s *snapshotter) trimBound(ctx context.Context) (sharedlog.Pos, meta.AgentInfo, bool, error) {
	if err := s.replica.Sync(ctx); err != nil {
		return 0, meta.AgentInfo{}, false, fmt.Errorf("reading the agent table: %w", err)
	}
	v := s.replica.View()
	defer v.Close()
	own, err := v.NextToApply()
	if err != nil {
		return 0, meta.AgentInfo{}, false, fmt.Errorf("reading the applied position: %w", err)
	}
	low, held, err := v.LowestLiveApplied(s.self)
	if err != nil {
		return 0, meta.AgentInfo{}, false, fmt.Errorf("reading the agent table: %w", err)
	}
	if !held || low.Applied > own {
		return sharedlog.Pos(own), meta.AgentInfo{}, false, nil
	}
	return sharedlog.Pos(low.Applied), low, true, nil
}

// waitTaken waits until at least n snapshots were taken and returns the
// newest.
func (s *snapshotter) waitTaken(ctx context.Context, n int) (SnapshotResult, error) {
	for {
		s.mu.Lock()
		last, taken, ch := s.mu.last, s.mu.taken, s.mu.changed
		s.mu.Unlock()
		if taken >= n {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return SnapshotResult{}, ctx.Err()
		case <-ch:
		}
	}
}

// stop ends the loop and waits for a snapshot in flight; later runs
// fail with errStopping. The replica may be closed once it returns.
func (s *snapshotter) stop() {
	s.cancel()
	s.loop.Wait()
	s.runMu.Lock()
	s.mu.Lock()
	s.mu.stopped = true
	s.mu.Unlock()
	s.runMu.Unlock()
}

// restoreIfEmpty restores the newest snapshot into dir when dir holds no
// replica yet (an agent started on an empty or wiped data dir), so that
// replica.Open then plays only the log's tail.
//
// It restores whenever a snapshot exists, not only when the log's trim
// point is above 0. Apply is deterministic, so a snapshot of this log at
// P holds exactly what replaying the log up to P would build: preferring
// it is never wrong, and it bounds start-up by the tail after P instead
// of the whole history, which an untrimmed log can still hold (trimming
// off, or held back for a lagging agent). Waiting for a trim would add no
// safety either; what can go wrong is a snapshot of another cluster's
// log, and the checks below catch what they can of that: a snapshot past
// the log's tail cannot be of this log, and one below its trim point
// cannot catch up. Both fail Start rather than serve wrong metadata.
// Without a snapshot, replica.Open replays the log from 0, which fails with
// sharedlog.ErrTrimmed if the log was trimmed.
func restoreIfEmpty(ctx context.Context, dir string, store objstore.Store, log *sharedlog.VirtualLog, logger *slog.Logger) error {
	empty, err := emptyDir(dir)
	if err != nil || !empty {
		return err
	}
	latest, err := replica.LatestSnapshot(ctx, store, SnapshotPrefix)
	if errors.Is(err, replica.ErrNoSnapshot) {
		logger.Info("empty data dir and no snapshot in the object store: replaying the log from the start",
			"prefix", SnapshotPrefix)
		return nil
	}
	if err != nil {
		return fmt.Errorf("looking for a snapshot to restore: %w", err)
	}
	tail, _, err := log.CheckTail(ctx)
	if err != nil {
		return fmt.Errorf("log tail: %w", err)
	}
	trim := log.Chain().TrimPoint
	switch {
	case latest.Pos > tail:
		return fmt.Errorf("snapshot %s is at log position %d, past the log's tail %d: the object store and the log do not belong to one cluster",
			latest.Key, latest.Pos, tail)
	case latest.Pos < trim:
		return fmt.Errorf("newest snapshot %s is at log position %d, below the log's trim point %d: it cannot catch up",
			latest.Key, latest.Pos, trim)
	}
	start := time.Now()
	info, err := replica.Restore(ctx, store, SnapshotPrefix, dir)
	if err != nil {
		return fmt.Errorf("restore snapshot %s: %w", latest.Key, err)
	}
	logger.Info("empty data dir: restored the newest metadata snapshot; replaying the log's tail",
		"pos", info.Pos, "key", info.Key, "files", info.Files, "bytes", info.Bytes,
		"created_at", info.CreatedAt, "tail", tail, "trim_point", trim, "duration", time.Since(start))
	return nil
}

// emptyDir reports whether dir is missing or empty.
func emptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return false, nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return true, nil
}
