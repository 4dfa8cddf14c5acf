package viewsnap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/placement"
	"github.com/strandkafka/strand/internal/sql/views"
)

// Views is what the snapshotter needs of the runner (views.Runner).
type Views interface {
	// Maintained are the views with a task on this agent.
	Maintained() []meta.Relation
	// Dir is a view's state directory.
	Dir(id uint64) string
	// Written is the view's WAL bytes since its state opened and its
	// epoch; ok false while its state is not open.
	Written(id uint64) (bytes, epoch uint64, ok bool)
	// Checkpoint checkpoints the view's state into dir between epochs.
	Checkpoint(id uint64, dir string) (views.CheckpointInfo, error)
}

// Config configures a Snapshotter.
type Config struct {
	Store objstore.Store
	// Meta is the agent's copy of the catalog.
	Meta  meta.Viewer
	Views Views
	// Placement decides which agent snapshots a view (key
	// "sql-view:<id>") and collects its prefix.
	Placement placement.Ring
	// AgentID names this agent's markers (unique per agent run).
	AgentID string
	// Staging is a directory of the agent's own, on the views'
	// filesystem, for checkpoints (hard links) and downloads.
	Staging string
	// Interval is how often a view changed since its last snapshot is
	// snapshotted (DefaultInterval); MaxBytes takes one sooner once its
	// state has written that many bytes (DefaultMaxBytes; <0: never).
	Interval time.Duration
	MaxBytes int64
	// Check is how often the loop looks at the views (default
	// min(Interval, 10 s)).
	Check time.Duration
	// Keep is how many snapshots of a view stay (DefaultKeep).
	Keep int
	// SweepInterval is how often dropped views' prefixes are looked
	// for (default 10 min; negative: never, for a second Snapshotter
	// over the same Root, as the sinks' is).
	SweepInterval time.Duration
	// Key is the placement key that decides who snapshots the relation
	// id (default Key; a sink's is sinks.PlacementKey, its owner's, as
	// only the owner has its state).
	Key     func(id uint64) string
	Metrics *Metrics
	Clock   clock.Clock
	Logger  *slog.Logger
}

// Defaults.
const (
	DefaultInterval = 5 * time.Minute
	DefaultMaxBytes = 256 << 20
	DefaultKeep     = 2
)

// Snapshotter takes the snapshots of the views this agent owns and
// restores a missing view state from the newest one (Restore, the
// runner's views.Config.Restore).
type Snapshotter struct {
	cfg Config
	// runMu serializes Snapshot calls (the loop's and others') and
	// guards seen and last.
	runMu sync.Mutex
	// seen: marker keys, and when this snapshotter first listed them
	// (gc.go).
	seen map[string]time.Time
	// last: per view, what its last snapshot here saw.
	last map[uint64]lastSnap
}

type lastSnap struct {
	at       time.Time
	walBytes uint64
	epoch    uint64
}

// New returns a Snapshotter; Run runs its loop.
func New(cfg Config) (*Snapshotter, error) {
	if cfg.Store == nil || cfg.Meta == nil || cfg.Views == nil || cfg.Staging == "" || cfg.AgentID == "" {
		return nil, errors.New("viewsnap: Store, Meta, Views, Staging and AgentID are required")
	}
	cfg.AgentID = url.PathEscape(cfg.AgentID)
	cfg.Clock = clock.OrReal(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Check <= 0 {
		cfg.Check = min(cfg.Interval, 10*time.Second)
	}
	if cfg.Keep <= 0 {
		cfg.Keep = DefaultKeep
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = 10 * time.Minute
	}
	if cfg.Key == nil {
		cfg.Key = Key
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	// Whatever a crash left staged is nobody's.
	if err := os.RemoveAll(cfg.Staging); err != nil {
		return nil, err
	}
	return &Snapshotter{cfg: cfg, seen: map[string]time.Time{}, last: map[uint64]lastSnap{}}, nil
}

// Key is the placement key of the view with relation id id.
func Key(id uint64) string { return "sql-view:" + strconv.FormatUint(id, 10) }

// Run snapshots the owned views that changed, every Check, until ctx
// ends, and sweeps dropped views' prefixes every SweepInterval.
func (s *Snapshotter) Run(ctx context.Context) {
	lastSweep := s.cfg.Clock.Now()
	for {
		if clock.Sleep(ctx, s.cfg.Clock, s.cfg.Check) != nil {
			return
		}
		for _, rel := range s.cfg.Views.Maintained() {
			if ctx.Err() != nil {
				return
			}
			if !s.due(rel.ID) {
				continue
			}
			if _, err := s.Snapshot(ctx, rel); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("materialized view snapshot failed; retrying later", "view", rel.Name, "err", err)
			}
		}
		if s.cfg.SweepInterval > 0 && clock.Since(s.cfg.Clock, lastSweep) >= s.cfg.SweepInterval {
			lastSweep = s.cfg.Clock.Now()
			if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("sweeping dropped views' snapshots failed", "err", err)
			}
		}
	}
}

// due reports whether the view is this agent's to snapshot and changed
// enough, or long enough ago, since its last snapshot here.
func (s *Snapshotter) due(id uint64) bool {
	if !s.cfg.Placement.Owns(s.cfg.Key(id)) {
		return false
	}
	bytes, epoch, ok := s.cfg.Views.Written(id)
	if !ok {
		return false
	}
	s.runMu.Lock()
	last, had := s.last[id]
	s.runMu.Unlock()
	if !had {
		return epoch > 0
	}
	if epoch == last.epoch {
		return false // nothing committed since
	}
	if bytes < last.walBytes {
		last.walBytes = 0 // the state was opened again
	}
	return clock.Since(s.cfg.Clock, last.at) >= s.cfg.Interval ||
		s.cfg.MaxBytes > 0 && int64(bytes-last.walBytes) >= s.cfg.MaxBytes
}

// Result is what one Snapshot did.
type Result struct {
	// Key is the manifest's object key; Files and Bytes its checkpoint.
	Key   string
	Files int
	Bytes int64
	// UploadedFiles and UploadedBytes are what this call uploaded (the
	// rest its earlier snapshots had).
	UploadedFiles int
	UploadedBytes int64
	// Offsets: the sum of the input offsets the snapshot resumes from.
	Offsets int64
	// Existed: the newest snapshot was of the same state already.
	Existed  bool
	GC       GCResult
	Duration time.Duration
}

// Snapshot takes a snapshot of rel's state now, whoever owns it, then
// collects its older ones.
func (s *Snapshotter) Snapshot(ctx context.Context, rel meta.Relation) (Result, error) {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	start := s.cfg.Clock.Now()
	prefix := ViewPrefix(rel.ID)
	if err := os.MkdirAll(s.cfg.Staging, 0o755); err != nil {
		return Result{}, err
	}
	tmp, err := os.MkdirTemp(s.cfg.Staging, fmt.Sprintf("checkpoint-%d-", rel.ID))
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(tmp)
	writer, err := writerID(s.cfg.Views.Dir(rel.ID))
	if err != nil {
		return Result{}, fmt.Errorf("viewsnap: writer id: %w", err)
	}
	ck := filepath.Join(tmp, "state")
	info, err := s.cfg.Views.Checkpoint(rel.ID, ck)
	if err != nil {
		return Result{}, fmt.Errorf("viewsnap: checkpoint: %w", err)
	}
	private, err := sealCheckpoint(ck)
	if err != nil {
		return Result{}, err
	}
	// Announced before reading what the store holds (gc.go).
	runStart := s.cfg.Clock.Now()
	mk := newMarker(prefix, pendingDir, s.cfg.AgentID, runStart)
	defer deleteMarker(ctx, s.cfg.Store, prefix, pendingDir, mk)
	if err := s.waitForGC(ctx, prefix, mk); err != nil {
		return Result{}, err
	}
	up, err := upload(ctx, s.cfg.Store, prefix, ck, manifest{Format: formatV1, View: rel.ID, Writer: writer,
		Offsets: info.Offsets, Epoch: info.Epoch, Inputs: info.Inputs, CreatedAt: s.cfg.Clock.Now().UTC()},
		private, readOrigin(s.cfg.Views.Dir(rel.ID)), func() error {
			if d := clock.Since(s.cfg.Clock, runStart); d > maxSnapshotRunTime {
				return fmt.Errorf("viewsnap: snapshot uploads took %v, past %v: a GC may have taken it for dead", d, maxSnapshotRunTime)
			}
			return nil
		})
	if err != nil {
		return Result{}, err
	}
	s.last[rel.ID] = lastSnap{at: s.cfg.Clock.Now(), walBytes: info.WALBytes, epoch: info.Epoch}
	res := Result{Key: manifestKey(prefix, up.m.Offsets, up.m.Writer), Files: len(up.m.Files), Bytes: up.m.Bytes(),
		UploadedFiles: up.uploadedFiles, UploadedBytes: up.uploadedBytes, Offsets: up.m.Offsets, Existed: up.existed}
	res.GC, err = s.collect(ctx, prefix, s.cfg.Keep)
	if err != nil {
		s.cfg.Logger.Warn("materialized view snapshot GC failed; the next one deletes what it left", "view", rel.Name, "err", err)
	}
	res.Duration = clock.Since(s.cfg.Clock, start)
	m := s.cfg.Metrics
	if !up.existed {
		m.snapshots.WithLabelValues(rel.Name).Inc()
		m.snapshotBytes.WithLabelValues(rel.Name).Add(float64(up.uploadedBytes))
		m.snapshotSize.WithLabelValues(rel.Name).Set(float64(res.Bytes))
		m.snapshotSeconds.WithLabelValues(rel.Name).Set(res.Duration.Seconds())
	}
	s.cfg.Logger.Info("materialized view snapshot taken", "view", rel.Name, "key", res.Key, "files", res.Files, "bytes", res.Bytes,
		"uploaded_files", res.UploadedFiles, "uploaded_bytes", res.UploadedBytes, "offsets", res.Offsets, "epoch", info.Epoch,
		"existed", up.existed, "gc_manifests", res.GC.Manifests, "gc_files", res.GC.Files, "gc_deferred", res.GC.Deferred,
		"duration", res.Duration)
	return res, nil
}

// Restore is views.Config.Restore: it puts the newest snapshot of rel
// that downloads and checks whole into dir (missing), trying the one
// before if the newest is damaged or collected meanwhile. With none, it
// logs why and leaves dir missing: the view is rebuilt from its inputs'
// beginning.
func (s *Snapshotter) Restore(ctx context.Context, rel meta.Relation, dir string) {
	start := s.cfg.Clock.Now()
	prefix := ViewPrefix(rel.ID)
	m := s.cfg.Metrics
	keys, err := listManifests(ctx, s.cfg.Store, prefix)
	if err != nil {
		s.cfg.Logger.Warn("materialized view: listing its snapshots failed; rebuilding from the inputs' beginning", "view", rel.Name, "err", err)
		m.restores.WithLabelValues(rel.Name, "failed").Inc()
		return
	}
	if len(keys) == 0 {
		s.cfg.Logger.Info("materialized view: no snapshot; building from the inputs' beginning", "view", rel.Name)
		m.restores.WithLabelValues(rel.Name, "none").Inc()
		m.restoreSeconds.WithLabelValues(rel.Name).Set(clock.Since(s.cfg.Clock, start).Seconds())
		return
	}
	for i := len(keys) - 1; i >= 0 && i >= len(keys)-s.cfg.Keep; i-- {
		man, err := readManifest(ctx, s.cfg.Store, keys[i])
		if err == nil && man.View != rel.ID {
			err = fmt.Errorf("%w: manifest of view %d under view %d's prefix", ErrCorrupt, man.View, rel.ID)
		}
		var tmp string
		if err == nil {
			tmp, err = restoreOne(ctx, s.cfg.Store, prefix, s.cfg.Staging, keys[i], man)
		}
		if err == nil {
			if err = os.MkdirAll(filepath.Dir(dir), 0o755); err == nil {
				err = os.Rename(tmp, dir)
			}
			if err != nil {
				os.RemoveAll(tmp)
			}
		}
		if err != nil {
			s.cfg.Logger.Warn("materialized view: snapshot unusable", "view", rel.Name, "key", keys[i], "err", err)
			continue
		}
		d := clock.Since(s.cfg.Clock, start)
		m.restores.WithLabelValues(rel.Name, "restored").Inc()
		m.restoreSeconds.WithLabelValues(rel.Name).Set(d.Seconds())
		s.cfg.Logger.Info("materialized view restored from its snapshot; reading its inputs from the snapshot's positions",
			"view", rel.Name, "key", keys[i], "files", len(man.Files), "bytes", man.Bytes(), "offsets", man.Offsets, "duration", d)
		return
	}
	m.restores.WithLabelValues(rel.Name, "failed").Inc()
	s.cfg.Logger.Warn("materialized view: no snapshot could be restored; rebuilding from the inputs' beginning", "view", rel.Name)
}

// Sweep deletes the prefixes of views dropped from the catalog whose
// key this agent owns, and returns how many objects it deleted.
func (s *Snapshotter) Sweep(ctx context.Context) (int, error) {
	v := s.cfg.Meta.View()
	rels, err := v.Relations()
	var next uint64
	if err == nil {
		next, err = v.NextRelationID()
	}
	v.Close()
	if err != nil {
		return 0, err
	}
	live := map[uint64]bool{}
	for _, r := range rels {
		live[r.ID] = true
	}
	objs, err := s.cfg.Store.List(ctx, Root)
	if err != nil {
		return 0, err
	}
	done := map[uint64]bool{}
	n := 0
	for _, o := range objs {
		idText, _, ok := strings.Cut(strings.TrimPrefix(o.Key, Root), "/")
		id, perr := strconv.ParseUint(idText, 10, 64)
		if !ok || perr != nil || done[id] {
			continue
		}
		done[id] = true
		// At or past next: created after this copy of the catalog,
		// not applied here yet.
		if live[id] || id >= next || !s.cfg.Placement.Owns(Key(id)) {
			continue
		}
		k, err := deletePrefix(ctx, s.cfg.Store, ViewPrefix(id))
		n += k
		if err != nil {
			return n, err
		}
		s.cfg.Logger.Info("deleted a dropped materialized view's snapshots", "view_id", id, "objects", k)
	}
	return n, nil
}
