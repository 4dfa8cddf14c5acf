package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/placement"
	"github.com/strandkafka/strand/internal/replica"
)

// Metadata is what the coordinator needs of the metadata database.
// *replica.Replica implements it.
type Metadata interface {
	// View is a snapshot of the local copy; the caller closes it.
	View() *meta.View
	// Submit queues commands for the log; commands submitted in sequence
	// apply in that sequence.
	Submit(ctx context.Context, cmds []meta.Command) (*replica.Proposal, error)
	// Sync plays the local copy up to the log's tail.
	Sync(ctx context.Context) error
}

var _ Metadata = (*replica.Replica)(nil)

// Defaults for Config, Kafka's where Kafka has one.
const (
	// DefaultInitialRebalanceDelay is group.initial.rebalance.delay.ms.
	DefaultInitialRebalanceDelay = 3 * time.Second
	// DefaultMinSessionTimeout and DefaultMaxSessionTimeout are
	// group.min.session.timeout.ms and group.max.session.timeout.ms.
	DefaultMinSessionTimeout = 6 * time.Second
	DefaultMaxSessionTimeout = 30 * time.Minute
	// DefaultMaxGroupSize is group.max.size. Kafka leaves it unbounded;
	// here it bounds a group's memory.
	DefaultMaxGroupSize = 1000
	// DefaultMaxGroups bounds the groups held in memory. Idle empty
	// groups are dropped from memory (their state is stored) to make
	// room.
	DefaultMaxGroups = 100_000
	// DefaultOffsetRetention is offsets.retention.minutes (7 days).
	DefaultOffsetRetention = 7 * 24 * time.Hour
	// DefaultOffsetRetentionCheckInterval is
	// offsets.retention.check.interval.ms.
	DefaultOffsetRetentionCheckInterval = 10 * time.Minute
	// DefaultMaxOffsetMetadataBytes is offset.metadata.max.bytes.
	DefaultMaxOffsetMetadataBytes = 4096
	// DefaultConsumerSessionTimeout and DefaultConsumerHeartbeatInterval
	// are group.consumer.session.timeout.ms and
	// group.consumer.heartbeat.interval.ms (KIP-848 groups).
	DefaultConsumerSessionTimeout    = 45 * time.Second
	DefaultConsumerHeartbeatInterval = 5 * time.Second
	// DefaultShareSessionTimeout and DefaultShareHeartbeatInterval are
	// group.share.session.timeout.ms and group.share.heartbeat.interval.ms.
	DefaultShareSessionTimeout    = 45 * time.Second
	DefaultShareHeartbeatInterval = 5 * time.Second
)

// Bounds of the coordinator's own work.
const (
	// loadTimeout bounds the Sync before a group is loaded.
	loadTimeout = 10 * time.Second
	// sweepTimeout bounds one offset expiry sweep's proposals.
	sweepTimeout = time.Minute
	// maxLockAttempts bounds the retries of a lookup that raced an
	// unload.
	maxLockAttempts = 8
	// maxMemberIDBytes bounds the client id part of a generated member
	// id, as Kafka does not; ids are repeated in every request.
	maxMemberIDBytes = 512
)

// Config configures a Coordinator.
type Config struct {
	// Meta is the agent's metadata replica.
	Meta Metadata
	// NodeID is this agent's broker id.
	NodeID int32
	// Nodes returns the node ids of the live agents, this one included;
	// nil means this agent alone. Groups are spread over them
	// (placement.Ring).
	Nodes func() []int32
	// Clock times every timeout; default clock.Real.
	Clock clock.Clock
	// InitialRebalanceDelay is how long the first rebalance of an empty
	// group waits for more members (extended per new member, up to the
	// rebalance timeout). Zero means the default; negative means none.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeout a
	// member may ask for (INVALID_SESSION_TIMEOUT otherwise).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// MaxGroupSize bounds members per group (GROUP_MAX_SIZE_REACHED).
	MaxGroupSize int
	// MaxGroups bounds groups held in memory.
	MaxGroups int
	// OffsetRetention and OffsetRetentionCheckInterval drive offset
	// expiry (ExpireOffsets). A negative interval turns the sweep off.
	OffsetRetention              time.Duration
	OffsetRetentionCheckInterval time.Duration
	// HoldExpiry, when set and true, skips offset expiry sweeps: the
	// agent's clock disagrees with the log's, and expiry is a decision
	// by time.
	HoldExpiry func() bool
	// MaxOffsetMetadataBytes bounds a committed offset's metadata
	// (OFFSET_METADATA_TOO_LARGE); at most meta.MaxOffsetMetadataBytes.
	MaxOffsetMetadataBytes int
	// ConsumerSessionTimeout and ConsumerHeartbeatInterval are the
	// session and heartbeat interval of KIP-848 consumer group members:
	// the coordinator, not the member, chooses them.
	ConsumerSessionTimeout    time.Duration
	ConsumerHeartbeatInterval time.Duration
	// ShareSessionTimeout and ShareHeartbeatInterval are the defaults
	// of share group members' session and heartbeat interval
	// (group.share.session.timeout.ms, group.share.heartbeat.interval.ms);
	// a group's share.* configs override them.
	ShareSessionTimeout    time.Duration
	ShareHeartbeatInterval time.Duration
	// DeleteShareState, if set, deletes a share group's share
	// partitions' state when DeleteGroups deletes the group: package
	// share's, wired by the agent. Until then the share state stays.
	DeleteShareState func(ctx context.Context, group string) error
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	c.Clock = clock.OrReal(c.Clock)
	if c.InitialRebalanceDelay == 0 {
		c.InitialRebalanceDelay = DefaultInitialRebalanceDelay
	}
	if c.InitialRebalanceDelay < 0 {
		c.InitialRebalanceDelay = 0
	}
	if c.MinSessionTimeout == 0 {
		c.MinSessionTimeout = DefaultMinSessionTimeout
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = DefaultMaxSessionTimeout
	}
	if c.MaxGroupSize == 0 {
		c.MaxGroupSize = DefaultMaxGroupSize
	}
	if c.MaxGroups == 0 {
		c.MaxGroups = DefaultMaxGroups
	}
	if c.OffsetRetention == 0 {
		c.OffsetRetention = DefaultOffsetRetention
	}
	if c.OffsetRetentionCheckInterval == 0 {
		c.OffsetRetentionCheckInterval = DefaultOffsetRetentionCheckInterval
	}
	if c.MaxOffsetMetadataBytes == 0 {
		c.MaxOffsetMetadataBytes = DefaultMaxOffsetMetadataBytes
	}
	if c.ConsumerSessionTimeout == 0 {
		c.ConsumerSessionTimeout = DefaultConsumerSessionTimeout
	}
	if c.ConsumerHeartbeatInterval == 0 {
		c.ConsumerHeartbeatInterval = DefaultConsumerHeartbeatInterval
	}
	if c.ShareSessionTimeout == 0 {
		c.ShareSessionTimeout = DefaultShareSessionTimeout
	}
	if c.ShareHeartbeatInterval == 0 {
		c.ShareHeartbeatInterval = DefaultShareHeartbeatInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first invalid field, after defaults.
func (c Config) Validate() error {
	c.setDefaults()
	switch {
	case c.Meta == nil:
		return errors.New("group: Config.Meta is nil")
	case c.MinSessionTimeout < 0 || c.MaxSessionTimeout < c.MinSessionTimeout:
		return fmt.Errorf("group: session timeout bounds [%v, %v]", c.MinSessionTimeout, c.MaxSessionTimeout)
	case c.MaxGroupSize < 1 || c.MaxGroupSize > maxStoredMembers:
		return fmt.Errorf("group: MaxGroupSize %d not in [1, %d]", c.MaxGroupSize, maxStoredMembers)
	case c.MaxGroups < 1:
		return fmt.Errorf("group: MaxGroups %d < 1", c.MaxGroups)
	case c.OffsetRetention < 0:
		return fmt.Errorf("group: OffsetRetention %v < 0", c.OffsetRetention)
	case c.ConsumerSessionTimeout < 0 || c.ConsumerHeartbeatInterval < 0 || c.ConsumerHeartbeatInterval >= c.ConsumerSessionTimeout:
		return fmt.Errorf("group: consumer heartbeat interval %v must be below the session timeout %v", c.ConsumerHeartbeatInterval, c.ConsumerSessionTimeout)
	case c.ShareSessionTimeout < 0 || c.ShareHeartbeatInterval < 0 || c.ShareHeartbeatInterval >= c.ShareSessionTimeout:
		return fmt.Errorf("group: share heartbeat interval %v must be below the session timeout %v", c.ShareHeartbeatInterval, c.ShareSessionTimeout)
	case c.MaxOffsetMetadataBytes < 0 || c.MaxOffsetMetadataBytes > meta.MaxOffsetMetadataBytes:
		return fmt.Errorf("group: MaxOffsetMetadataBytes %d not in [0, %d]", c.MaxOffsetMetadataBytes, meta.MaxOffsetMetadataBytes)
	}
	return nil
}

// maxStoredMembers mirrors meta's bound on a stored group.
const maxStoredMembers = 1 << 16

// Client identifies who sent a request.
type Client struct {
	// ID is the request header's client id.
	ID string
	// Host is the client's address as Kafka prints it ("/127.0.0.1").
	Host string
}

// Coordinator is the group coordinator of one agent. It is safe for
// concurrent use; a blocking call (JoinGroup, SyncGroup) returns when its
// phase completes or its ctx ends.
type Coordinator struct {
	cfg   Config
	store Metadata
	clock clock.Clock
	log   *slog.Logger

	// ctx lives until Close: stores outlive the requests that start
	// them.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts store waiters and sweeps.
	wg sync.WaitGroup

	mu struct {
		sync.Mutex
		groups map[string]*group
		closed bool
		sweep  clock.Timer
	}

	// changed is closed and replaced after every change of a group's
	// state, for tests that wait for one.
	changed struct {
		sync.Mutex
		ch chan struct{}
	}
}

// New returns a coordinator for the groups this agent owns and loads
// those whose stored state has members, so their sessions run out if the
// members do not come back.
func New(ctx context.Context, cfg Config) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	c := &Coordinator{cfg: cfg, store: cfg.Meta, clock: cfg.Clock, log: cfg.Logger}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.groups = make(map[string]*group)
	c.changed.ch = make(chan struct{})
	if err := c.loadOwned(ctx); err != nil {
		c.cancel()
		return nil, err
	}
	if cfg.OffsetRetentionCheckInterval > 0 {
		c.mu.Lock()
		c.mu.sweep = c.clock.AfterFunc(cfg.OffsetRetentionCheckInterval, c.runSweep)
		c.mu.Unlock()
	}
	return c, nil
}

// loadOwned loads every owned group with stored members.
func (c *Coordinator) loadOwned(ctx context.Context) error {
	if err := c.store.Sync(ctx); err != nil {
		return fmt.Errorf("group: syncing the metadata replica: %w", err)
	}
	v := c.store.View()
	defer v.Close()
	gs, err := v.Groups()
	if err != nil {
		return fmt.Errorf("group: listing groups: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range gs {
		if len(gs[i].Members) == 0 || !c.Owns(gs[i].Name) {
			continue
		}
		c.mu.groups[gs[i].Name] = c.loadGroup(&gs[i])
	}
	return nil
}

// Close stops the coordinator. Members waiting in JoinGroup or SyncGroup
// get NOT_COORDINATOR, which sends them to look the coordinator up again.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	clock.Stop(c.mu.sweep)
	groups := make([]*group, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		groups = append(groups, g)
	}
	c.mu.Unlock()
	for _, g := range groups {
		g.mu.Lock()
		g.unloadLocked(kerr.NotCoordinator)
		g.mu.Unlock()
	}
	c.cancel()
	c.wg.Wait()
	c.notify()
	return nil
}

// Coordinator returns the node id of the agent that coordinates key.
func (c *Coordinator) Coordinator(key string) int32 { return c.placement().Owner(key) }

func (c *Coordinator) placement() placement.Ring {
	return placement.Ring{Self: c.cfg.NodeID, Live: c.cfg.Nodes}
}

// Owns reports whether this agent coordinates key, by the placement
// FindCoordinator answers with. The agent's group lag metrics and the
// __consumer_offsets resync ask it too, so all three agree on the owner.
func (c *Coordinator) Owns(key string) bool { return c.placement().Owns(key) }

// notify wakes whoever waits for a state change.
func (c *Coordinator) notify() {
	c.changed.Lock()
	close(c.changed.ch)
	c.changed.ch = make(chan struct{})
	c.changed.Unlock()
}

// Changed returns a channel closed at the next change of any group's
// state. Read the state after taking the channel, then wait on it.
func (c *Coordinator) Changed() <-chan struct{} {
	c.changed.Lock()
	defer c.changed.Unlock()
	return c.changed.ch
}

// lockGroup returns name's group locked, loading it from the store if it
// is not in memory. With create, a group that does not exist is made
// (empty); without, (nil, nil) means there is no such group.
func (c *Coordinator) lockGroup(ctx context.Context, name string, create bool) (*group, *kerr.Error) {
	for range maxLockAttempts {
		g, kerrv := c.lookup(ctx, name, create)
		if kerrv != nil || g == nil {
			return nil, kerrv
		}
		g.mu.Lock()
		if !g.gone {
			return g, nil
		}
		g.mu.Unlock()
	}
	return nil, kerr.CoordinatorNotAvailable
}

func (c *Coordinator) lookup(ctx context.Context, name string, create bool) (*group, *kerr.Error) {
	c.mu.Lock()
	closed, g := c.mu.closed, c.mu.groups[name]
	c.mu.Unlock()
	switch {
	case closed:
		return nil, kerr.NotCoordinator
	case g != nil:
		return g, nil
	}

	// Another agent may have coordinated the group until now: read its
	// state only after catching up with the log.
	sctx, cancel := context.WithTimeout(ctx, loadTimeout)
	err := c.store.Sync(sctx)
	cancel()
	if err != nil {
		return nil, kerr.CoordinatorLoadInProgress
	}
	v := c.store.View()
	stored, ok, err := v.Group(name)
	v.Close()
	if err != nil {
		c.log.Warn("group: reading stored state", "group", name, "err", err)
		return nil, kerr.CoordinatorNotAvailable
	}
	if !ok && !create {
		return nil, nil
	}
	if !ok {
		stored = meta.Group{Name: name}
	}
	loaded := c.loadGroup(&stored)

	c.mu.Lock()
	defer c.mu.Unlock()
	// discard drops the load: it was never in the map and nobody waits
	// on it, so stopping its timers is all there is.
	discard := func() {
		loaded.mu.Lock()
		loaded.gone = true
		loaded.stopTimersLocked()
		loaded.mu.Unlock()
	}
	if c.mu.closed {
		discard()
		return nil, kerr.NotCoordinator
	}
	if g := c.mu.groups[name]; g != nil {
		discard()
		return g, nil
	}
	if len(c.mu.groups) >= c.cfg.MaxGroups && !c.evictIdleLocked() {
		discard()
		c.log.Warn("group: too many groups in memory", "max", c.cfg.MaxGroups)
		return nil, kerr.CoordinatorNotAvailable
	}
	c.mu.groups[name] = loaded
	return loaded, nil
}

// evictIdleLocked drops one idle empty group from memory, if there is
// one. Lock order is group then coordinator, so it only tries locks.
func (c *Coordinator) evictIdleLocked() bool {
	for name, g := range c.mu.groups {
		if !g.mu.TryLock() {
			continue
		}
		idle := g.idleLocked()
		if idle {
			g.gone = true
			g.stopTimersLocked()
			delete(c.mu.groups, name)
		}
		g.mu.Unlock()
		if idle {
			return true
		}
	}
	return false
}

// forget removes g from memory if it is still the group under its name.
func (c *Coordinator) forget(g *group) {
	c.mu.Lock()
	if c.mu.groups[g.name] == g {
		delete(c.mu.groups, g.name)
	}
	c.mu.Unlock()
}

// storeLocked queues cmd for the log behind every earlier store of g
// (queueing under g.mu fixes the order) and, once it is applied, calls
// done under g.mu, unless g was unloaded meanwhile.
func (g *group) storeLocked(cmd meta.Command, done func(meta.Result, error)) {
	c := g.c
	p, err := c.store.Submit(c.ctx, []meta.Command{cmd})
	g.storing++
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		var res meta.Result
		if err == nil {
			var rs []meta.Result
			if rs, err = p.Wait(c.ctx); err == nil {
				res = rs[0]
			}
		}
		if err != nil {
			c.log.Warn("group: storing group state failed", "group", g.name, "err", err)
		}
		g.mu.Lock()
		g.storing--
		if !g.gone && done != nil {
			done(res, err)
		}
		g.mu.Unlock()
		c.notify()
	}()
}

// storeErrorCode maps a failed store to what members are told: a
// generation fence means another coordinator has the group; anything
// else is retriable.
func (g *group) storeErrorCode(res meta.Result, err error) *kerr.Error {
	switch {
	case err != nil:
		return kerr.CoordinatorNotAvailable
	case res.Code == kerr.IllegalGeneration.Code:
		return kerr.NotCoordinator
	case res.Code != 0:
		return kerr.UnknownServerError
	}
	return nil
}

// runSweep is the offset expiry timer: it proposes ExpireOffsets for the
// owned groups that are not rebalancing, drops idle empty groups from
// memory, and re-arms itself.
func (c *Coordinator) runSweep() {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()

	ctx, cancel := context.WithTimeout(c.ctx, sweepTimeout)
	defer cancel()
	if c.cfg.HoldExpiry != nil && c.cfg.HoldExpiry() {
		// Skipped: the next sweep looks again.
	} else if err := c.ExpireOffsets(ctx); err != nil && c.ctx.Err() == nil {
		c.log.Warn("group: offset expiry", "err", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.closed {
		c.mu.sweep = c.clock.AfterFunc(c.cfg.OffsetRetentionCheckInterval, c.runSweep)
	}
}

// ExpireOffsets runs one offset expiry sweep now. The timer calls it
// every OffsetRetentionCheckInterval.
func (c *Coordinator) ExpireOffsets(ctx context.Context) error {
	v := c.store.View()
	gs, err := v.Groups()
	v.Close()
	if err != nil {
		return err
	}
	var names []string
	for i := range gs {
		name := gs[i].Name
		if !c.Owns(name) {
			continue
		}
		c.mu.Lock()
		g := c.mu.groups[name]
		c.mu.Unlock()
		if g != nil {
			g.mu.Lock()
			busy := g.state == statePreparingRebalance || g.state == stateCompletingRebalance
			g.mu.Unlock()
			if busy {
				continue
			}
		}
		names = append(names, name)
	}
	retention := c.cfg.OffsetRetention.Milliseconds()
	for len(names) > 0 {
		n := min(len(names), meta.MaxExpireGroups)
		p, err := c.store.Submit(ctx, []meta.Command{meta.ExpireOffsets{RetentionMs: retention, Groups: names[:n]}})
		if err != nil {
			return err
		}
		res, err := p.Wait(ctx)
		if err != nil {
			return err
		}
		if err := res[0].Err(); err != nil {
			return err
		}
		names = names[n:]
	}
	c.evictIdle()
	return nil
}

// evictIdle drops every idle empty group from memory: its state is
// stored, and a later request loads it again.
func (c *Coordinator) evictIdle() {
	c.mu.Lock()
	groups := make([]*group, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		groups = append(groups, g)
	}
	c.mu.Unlock()
	for _, g := range groups {
		g.mu.Lock()
		if !g.gone && g.idleLocked() {
			g.gone = true
			g.stopTimersLocked()
			c.forget(g)
		}
		g.mu.Unlock()
	}
}
