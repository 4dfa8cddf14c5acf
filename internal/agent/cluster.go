package agent

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/kafka"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
)

// heartbeatTimeout bounds one lease renewal; a renewal that cannot land
// within it is retried at the next tick, while the lease still has two
// thirds of its time left.
const heartbeatTimeout = 5 * time.Second

// membership keeps this agent registered in the replicated agent table
// (meta.AgentHeartbeat) and answers who the live agents are, for Metadata
// (kafka.ClusterInfo.Brokers) and group placement (group.Config.Nodes).
// Liveness is the log's: an agent is live while its lease, renewed through
// the log every lease/3, ends after the log clock. Each renewal carries the
// agent's applied position, which bounds how far other agents trim the
// log (snapshot.go).
type membership struct {
	replica *replica.Replica
	self    meta.AgentHeartbeat
	logger  *slog.Logger
	// renewed, if set, is called after each renewal has applied here.
	renewed func()
	// clk times the renewals (nil: the wall clock): the agent's clock,
	// which also stamps them, so a lease is renewed every third of it
	// by the same clock that measures it.
	clk clock.Clock

	cancel context.CancelFunc
	done   chan struct{}

	// mu guards the warning state, so a node id conflict is logged once
	// per change rather than at every renewal.
	mu struct {
		sync.Mutex
		conflict bool
	}
}

func newMembership(r *replica.Replica, self meta.AgentHeartbeat, logger *slog.Logger) *membership {
	return &membership{replica: r, self: self, logger: logger}
}

// register proposes the first heartbeat and returns once it is applied
// here, so the agent is in the table (and the cluster id fixed) before it
// serves.
func (m *membership) register(ctx context.Context) error {
	return m.heartbeat(ctx)
}

func (m *membership) heartbeat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, heartbeatTimeout)
	defer cancel()
	hb := m.self
	// Read before proposing, so the heartbeat can only understate where
	// this copy is by the time others read it. Agents that trim the
	// shared log keep the entries from here on (replica.TrimLog's bound).
	hb.Applied = uint64(m.replica.NextToApply())
	res, err := m.replica.Propose(ctx, hb)
	if err != nil {
		return err
	}
	if m.renewed != nil {
		m.renewed()
	}
	conflict := res.Code == kerr.DuplicateBrokerRegistration.Code
	if !conflict {
		if err := res.Err(); err != nil {
			return err
		}
	}
	m.mu.Lock()
	changed := conflict != m.mu.conflict
	m.mu.conflict = conflict
	m.mu.Unlock()
	if conflict {
		// Both agents keep renewing, each taking the node id back: the
		// operator gave two agents one --node-id and must fix that.
		m.logger.Error("node id is also used by another live agent; give every agent its own --node-id",
			"node_id", m.self.NodeID, "agent_id", m.self.AgentID, "detail", res.Message)
	} else if changed {
		m.logger.Info("node id conflict over", "node_id", m.self.NodeID)
	}
	return nil
}

// start renews the lease every lease/3 until stop, the first time after
// a random part of that: agents started together (a StatefulSet's pods)
// would otherwise renew at the same instants for good, and on a slot
// log (S3, DynamoDB) every renewal in such a burst loses its slot to
// the others and pays a failed put and a read for each. The period
// stays fixed after, so an idle agent's renewals are counted: 5 a
// minute on such a log.
func (m *membership) start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel, m.done = cancel, make(chan struct{})
	every := time.Duration(m.self.LeaseMs) * time.Millisecond / 3
	clk := clock.OrReal(m.clk)
	go func() {
		defer close(m.done)
		if clock.Sleep(ctx, clk, every/2+rand.N(every/2+1)) != nil {
			return
		}
		next := clk.Now()
		for {
			if err := m.heartbeat(ctx); err != nil && !errors.Is(err, context.Canceled) {
				m.logger.Warn("lease renewal failed; retrying at the next tick", "err", err)
			}
			// A fixed period, as a ticker's: a slow renewal does not
			// push the later ones back, and missed ticks are dropped.
			// A clock that stepped back waits no more than a period.
			next = next.Add(every)
			now := clk.Now()
			if next.Before(now) {
				next = now.Add(every - now.Sub(next)%every)
			} else if next.Sub(now) > every {
				next = now.Add(every)
			}
			if clock.Sleep(ctx, clk, next.Sub(now)) != nil {
				return
			}
		}
	}()
}

// stop ends the renewals and, when ctx allows, leaves the table so the
// others stop naming this agent at once instead of after the lease.
func (m *membership) stop(ctx context.Context) {
	if m.cancel != nil {
		m.cancel()
		<-m.done
	}
	leave := m.self
	leave.LeaseMs = 0
	ctx, cancel := context.WithTimeout(ctx, heartbeatTimeout)
	defer cancel()
	if _, err := m.replica.Propose(ctx, leave); err != nil {
		m.logger.Warn("leaving the agent table failed; others drop this agent after its lease", "err", err)
	}
}

// live returns the live agents from the local copy. The agent itself is
// always in the list: it is answering, whatever its lease says (a renewal
// may be late). An unreadable table falls back to this agent alone.
func (m *membership) live() []meta.AgentInfo {
	v := m.replica.View()
	as, err := v.LiveAgents()
	v.Close()
	if err != nil {
		m.logger.Warn("reading the agent table", "err", err)
		as = nil
	}
	if !slices.ContainsFunc(as, func(a meta.AgentInfo) bool { return a.NodeID == m.self.NodeID }) {
		s := m.self
		as = append(as, meta.AgentInfo{NodeID: s.NodeID, AgentID: s.AgentID, Host: s.Host, Port: s.Port, Rack: s.Rack})
		slices.SortFunc(as, func(a, b meta.AgentInfo) int { return int(a.NodeID) - int(b.NodeID) })
	}
	return as
}

// brokers is kafka.ClusterInfo.Brokers.
func (m *membership) brokers() []kafka.Broker {
	as := m.live()
	bs := make([]kafka.Broker, len(as))
	for i, a := range as {
		bs[i] = kafka.Broker{NodeID: a.NodeID, Host: a.Host, Port: a.Port, Rack: a.Rack}
		for _, e := range a.Endpoints {
			bs[i].Endpoints = append(bs[i].Endpoints, kafka.Endpoint{Listener: e.Listener, Host: e.Host, Port: e.Port})
		}
	}
	return bs
}

// nodes is group.Config.Nodes.
func (m *membership) nodes() []int32 {
	as := m.live()
	ids := make([]int32, len(as))
	for i, a := range as {
		ids[i] = a.NodeID
	}
	return ids
}

// clusterID is the replicated cluster id, fixed by the first heartbeat on
// the log, so register must have returned.
func (m *membership) clusterID() (string, error) {
	v := m.replica.View()
	defer v.Close()
	return v.ClusterID()
}

// racks are the racks of the live agents, for the zone metrics' labels.
func (m *membership) racks() []string {
	as := m.live()
	out := make([]string, 0, len(as))
	for _, a := range as {
		if a.Rack != "" {
			out = append(out, a.Rack)
		}
	}
	return out
}
