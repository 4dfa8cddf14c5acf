package agent

// The web console (package console) on the HTTP port, under /console/.
//
// Its Kafka client reaches this agent in process: each connection is a
// net.Pipe the Kafka server serves (kafka.Server.ServeConnAs) as
// consolePrincipal, on a PLAINTEXT twin of the first listener (so
// Metadata answers with that listener's addresses). That works whatever
// the listeners demand (TLS, SASL) and whatever the ACLs say, with no
// credentials to configure or leak, and no one on the network can open
// such a connection. Since every page reads as a super user, only a
// super user may use the console, pages and forms alike (admin_auth.go:
// the admin token, the loopback default, or a client certificate whose
// principal is in --super-users); Config.NoConsole (--console=false)
// turns it off.
//
// Any agent serves any partition, but two things are per agent: a group
// is coordinated by one agent, and DescribeLogDirs reports the
// partitions the answering agent leads. So when the other agents are
// reachable as this console could reach them (the first listener is
// PLAINTEXT and no authorizer is on), their addresses are dialed over
// TCP as an anonymous client. Otherwise every address leads to this
// agent: topics and records all work, while a group another agent
// coordinates answers NOT_COORDINATOR (the console of that agent shows
// it) and stored sizes cover the partitions this agent leads.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/console"
	"github.com/strandkafka/strand/internal/kafka"
)

// consolePrincipal is who the console's Kafka requests run as. Its type
// is one no authentication produces (every built-in one yields User), so
// no client can claim it; the authorizer counts it a super user.
var consolePrincipal = auth.Principal{Type: "Strand", Name: "console"}

// mountConsole serves the console and sends / to it, unless it is off.
func (a *Agent) mountConsole(mux *http.ServeMux) {
	if a.cfg.NoConsole {
		return
	}
	mux.Handle(console.Prefix, a.ifReady(func(w http.ResponseWriter, r *http.Request) {
		a.console.ServeHTTP(w, r)
	}))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, console.Prefix, http.StatusFound)
	})
}

// startConsole creates the console once the Kafka server runs; it must
// be set before a.ready.
func (a *Agent) startConsole() error {
	seed := a.kafkaLn.Addr().String()
	c, err := console.New(console.Config{
		Cluster: consoleCluster{a},
		Kafka: []kgo.Opt{
			kgo.SeedBrokers(seed),
			kgo.Dialer(a.consoleDial),
		},
		Authorize: func(r *http.Request) (int, error) {
			return a.authorizeHTTP(r, needSuperUser)
		},
		Throughput: a.throughput,
		Registry:   a.registry,
		SQL:        a.consoleSQL(),
		Connectors: a.consoleConnectors,
		Metrics:    a.metrics.reg,
		ShareCounts: func(group string) (console.ShareCounts, error) {
			st, err := a.ShareGroupState(group)
			if err != nil {
				return console.ShareCounts{}, err
			}
			out := console.ShareCounts{Truncated: st.Truncated}
			for _, p := range st.Partitions {
				out.Partitions = append(out.Partitions, console.SharePartitionCounts{Topic: p.Topic, Partition: p.Partition,
					EndOffset: p.EndOffset, Available: p.Available, Acquired: p.Acquired, Acknowledged: p.Acknowledged, Archived: p.Archived})
			}
			return out, nil
		},
		Clock:  a.members.clk,
		Logger: a.logger.With("component", "console"),
	})
	if err != nil {
		return err
	}
	a.console = c
	return nil
}

// consoleDial connects the console's Kafka client: in process to this
// agent, over TCP to another when that can work.
func (a *Agent) consoleDial(ctx context.Context, network, addr string) (net.Conn, error) {
	return a.inProcessDial(ctx, network, addr, consolePrincipal)
}

// inProcessDial connects an agent's own Kafka client as principal (a
// super user): in process to this agent, over TCP to another when that
// can work.
func (a *Agent) inProcessDial(ctx context.Context, network, addr string, principal auth.Principal) (net.Conn, error) {
	first := a.listeners[0]
	self := addr == a.kafkaLn.Addr().String() ||
		(first.endpoint.Host != "" && addr == net.JoinHostPort(first.endpoint.Host, strconv.Itoa(int(first.endpoint.Port))))
	if !self && first.protocol == auth.Plaintext && a.cfg.Authorizer == "" {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	client, server := net.Pipe()
	l := kafka.Listener{Name: first.name, Protocol: auth.Plaintext}
	go a.server.ServeConnAs(context.Background(), pipeAt{server, a.kafkaLn.Addr()}, l, principal)
	return client, nil
}

// pipeAt is a pipe end whose local address is the Kafka listener's, so
// that Metadata resolves an unadvertised host (a wildcard bind) to an
// address consoleDial knows as this agent's.
type pipeAt struct {
	net.Conn
	local net.Addr
}

func (p pipeAt) LocalAddr() net.Addr { return p.local }

// throughput is console.Config.Throughput: the Produce request and Fetch
// response byte counters of /metrics.
func (a *Agent) throughput() (in, out uint64) {
	read := func(c interface{ Write(*dto.Metric) error }) uint64 {
		var m dto.Metric
		if c.Write(&m) != nil || m.Counter == nil {
			return 0
		}
		return uint64(m.Counter.GetValue())
	}
	return read(a.metrics.produceBytes), read(a.metrics.fetchBytes)
}

// consoleCluster is console.Cluster: the admin API's log status.
type consoleCluster struct{ a *Agent }

func (cc consoleCluster) ClusterStatus(ctx context.Context) (console.ClusterStatus, error) {
	a := cc.a
	ls, _, err := a.logStatus(ctx)
	if err != nil {
		return console.ClusterStatus{}, err
	}
	st := console.ClusterStatus{
		NodeID: a.cfg.NodeID, WriterID: ls.Agent.WriterID, Incarnation: ls.Agent.Incarnation, Applied: ls.Agent.Applied,
		Tail: ls.Tail, Sealed: ls.Sealed, TrimPoint: ls.TrimPoint, ChainVersion: ls.Chain.Version,
		SnapshotError: ls.SnapshotError,
	}
	for _, s := range ls.Chain.Segments {
		st.Segments = append(st.Segments, console.Segment{Start: s.Start, End: s.End, Sealed: s.Sealed, URL: s.URL})
	}
	if s := ls.Snapshot; s != nil {
		st.Snapshot = &console.Snapshot{Pos: s.Pos, Key: s.Key, CreatedAt: s.CreatedAt, Files: s.Files, Bytes: s.Bytes}
	}
	// The status names each agent's first listener; the table has all.
	listeners := map[int32][]string{}
	v := a.replica.View()
	as, err := v.Agents()
	v.Close()
	if err != nil {
		return console.ClusterStatus{}, fmt.Errorf("agent table: %w", err)
	}
	for _, ag := range as {
		for _, e := range ag.Endpoints {
			listeners[ag.NodeID] = append(listeners[ag.NodeID], e.Listener+" "+net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))))
		}
	}
	for _, l := range ls.Agents {
		ls := listeners[l.NodeID]
		if len(ls) == 0 {
			ls = []string{net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))}
		}
		st.Agents = append(st.Agents, console.Agent{NodeID: l.NodeID, AgentID: l.AgentID, Listeners: ls,
			Applied: l.Applied, Expires: l.Expires, Live: l.Live})
	}
	return st, nil
}
