// The `cluster` command: info (Metadata) and health (Metadata, then
// ApiVersions to every agent it lists); its config subcommands are in
// cluster_config.go.

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/agent"
)

// ErrUnhealthy reports that `cluster health` found the cluster
// unhealthy; the reasons were already printed.
var ErrUnhealthy = errors.New("cluster is unhealthy")

// NewClusterCommand returns `cluster` with its info, health and config
// subcommands.
func NewClusterCommand() *cobra.Command {
	var opts ClientOptions
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show the cluster's agents and health; get and set broker configs and log levels",
		Args:  cobra.NoArgs,
	}
	opts.Register(cmd.PersistentFlags())
	cmd.AddCommand(newClusterInfoCmd(&opts), newClusterHealthCmd(&opts), newClusterConfigCmd(&opts), newClusterLogLevelCmd(&opts))
	return cmd
}

// clusterAgent is one agent (broker) as Metadata lists it, with what it
// counted by zone when --http reached it.
type clusterAgent struct {
	NodeID int32              `json:"node_id" yaml:"node_id"`
	Addr   string             `json:"addr" yaml:"addr"`
	Rack   string             `json:"rack,omitempty" yaml:"rack,omitempty"`
	Zones  *agent.ZoneTraffic `json:"zone_traffic,omitempty" yaml:"zone_traffic,omitempty"`
}

// clusterInfo is `cluster info`'s output.
type clusterInfo struct {
	ClusterID  string         `json:"cluster_id" yaml:"cluster_id"`
	Controller int32          `json:"controller" yaml:"controller"`
	Agents     []clusterAgent `json:"agents" yaml:"agents"`
	Topics     int            `json:"topics" yaml:"topics"`
	Partitions int            `json:"partitions" yaml:"partitions"`
}

func agentsOf(m kadm.Metadata) []clusterAgent {
	agents := make([]clusterAgent, 0, len(m.Brokers))
	for _, b := range m.Brokers {
		a := clusterAgent{NodeID: b.NodeID, Addr: net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))}
		if b.Rack != nil {
			a.Rack = *b.Rack
		}
		agents = append(agents, a)
	}
	slices.SortFunc(agents, func(a, b clusterAgent) int { return int(a.NodeID) - int(b.NodeID) })
	return agents
}

func newClusterInfoCmd(opts *ClientOptions) *cobra.Command {
	var (
		format *string
		https  []string
		admin  adminOptions
	)
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Show the cluster id, the controller, the agents (address, rack) and how many topics and partitions there are (internal ones included); with --http, what each agent counted by zone",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, ctx, done, err := opts.adminWithFormat(cmd.Context(), *format)
			if err != nil {
				return err
			}
			defer done()
			m, err := adm.Metadata(ctx)
			if err != nil {
				return fmt.Errorf("metadata: %w", err)
			}
			info := clusterInfo{ClusterID: m.Cluster, Controller: m.Controller, Agents: agentsOf(m), Topics: len(m.Topics)}
			for _, t := range m.Topics {
				info.Partitions += len(t.Partitions)
			}
			if err := addZoneTraffic(ctx, &info, https, admin); err != nil {
				return err
			}
			return WriteOutput(cmd.OutOrStdout(), *format, info, func(w io.Writer) error {
				t := newTable(w)
				t.row("CLUSTER", dash(info.ClusterID))
				t.row("CONTROLLER", info.Controller)
				t.row("TOPICS", info.Topics)
				t.row("PARTITIONS", info.Partitions)
				if err := t.flush(); err != nil {
					return err
				}
				fmt.Fprintln(w)
				t = newTable(w, "AGENT", "ADDRESS", "RACK")
				for _, a := range info.Agents {
					t.row(a.NodeID, a.Addr, dash(a.Rack))
				}
				if err := t.flush(); err != nil {
					return err
				}
				return writeZoneTraffic(w, info.Agents)
			})
		},
	}
	format = addOutputFlag(cmd)
	cmd.Flags().StringSliceVar(&https, "http", nil, "agents' HTTP addresses (their --http-listen), host:port or https://host:port, comma-separated: show what each counted by zone since it started")
	cmd.Flags().StringVar(&admin.TokenFile, "admin-token-file", envDefault("admin-token-file", ""), "file holding the agents' admin bearer token for --http (default: the token in STRAND_ADMIN_TOKEN)")
	return cmd
}

// addZoneTraffic asks each agent at https for its zone counters and
// adds them to the agent of info they name.
func addZoneTraffic(ctx context.Context, info *clusterInfo, https []string, admin adminOptions) error {
	for _, h := range https {
		o := admin
		o.HTTP = strings.TrimSpace(h)
		var zt agent.ZoneTraffic
		if err := o.do(ctx, http.MethodGet, agent.PathZones, nil, &zt); err != nil {
			return fmt.Errorf("--http %s: %w", o.HTTP, err)
		}
		i := slices.IndexFunc(info.Agents, func(a clusterAgent) bool { return a.NodeID == zt.NodeID })
		if i < 0 {
			return fmt.Errorf("--http %s: agent %d is not live in this cluster", o.HTTP, zt.NodeID)
		}
		info.Agents[i].Zones = &zt
	}
	return nil
}

// writeZoneTraffic writes, for the agents --http reached, the share of
// requests from clients of their zone, of another and of none known,
// and their bytes by whether they crossed zones, then by client zone.
func writeZoneTraffic(w io.Writer, agents []clusterAgent) error {
	if !slices.ContainsFunc(agents, func(a clusterAgent) bool { return a.Zones != nil }) {
		return nil
	}
	pct := func(n, total int64) string {
		if total == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
	}
	fmt.Fprintln(w)
	t := newTable(w, "AGENT", "RACK", "HIT", "MISS", "UNAWARE", "BYTES", "CROSSED", "UNKNOWN")
	for _, a := range agents {
		z := a.Zones
		if z == nil {
			continue
		}
		r := z.Requests
		reqs := r.Hit + r.Miss + r.Unaware
		var total, crossed, unknown int64
		for _, b := range z.Bytes {
			total += b.Bytes
			switch b.Crossed {
			case "yes":
				crossed += b.Bytes
			case "unknown":
				unknown += b.Bytes
			}
		}
		t.row(a.NodeID, dash(z.Rack), pct(r.Hit, reqs), pct(r.Miss, reqs), pct(r.Unaware, reqs),
			total, pct(crossed, total), pct(unknown, total))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w, "AGENT", "CLIENT ZONE", "BYTES IN", "BYTES OUT")
	for _, a := range agents {
		if a.Zones == nil {
			continue
		}
		in, out := map[string]int64{}, map[string]int64{}
		var zones []string
		for _, b := range a.Zones.Bytes {
			if _, ok := in[b.ClientZone]; !ok {
				zones = append(zones, b.ClientZone)
				in[b.ClientZone] = 0
			}
			if b.Direction == "in" {
				in[b.ClientZone] += b.Bytes
			} else {
				out[b.ClientZone] += b.Bytes
			}
		}
		slices.Sort(zones)
		for _, z := range zones {
			t.row(a.NodeID, z, in[z], out[z])
		}
	}
	return t.flush()
}

// clusterHealth is `cluster health`'s output. Partitions are named
// topic/partition.
type clusterHealth struct {
	Healthy    bool     `json:"healthy" yaml:"healthy"`
	Reasons    []string `json:"unhealthy_reasons,omitempty" yaml:"unhealthy_reasons,omitempty"`
	Controller int32    `json:"controller" yaml:"controller"`
	Agents     []int32  `json:"agents" yaml:"agents"`
	// DownAgents are listed by Metadata but did not answer ApiVersions.
	DownAgents []int32 `json:"down_agents" yaml:"down_agents"`
	// Leaderless partitions have no leader (-1, or LEADER_NOT_AVAILABLE).
	Leaderless []string `json:"leaderless_partitions" yaml:"leaderless_partitions"`
	// Offline partitions are led by an agent that is down or unlisted.
	Offline []string `json:"offline_partitions" yaml:"offline_partitions"`
}

// assessHealth judges m given which agents failed to answer.
func assessHealth(m kadm.Metadata, down map[int32]error) clusterHealth {
	h := clusterHealth{Controller: m.Controller, Agents: []int32{}, DownAgents: []int32{}, Leaderless: []string{}, Offline: []string{}}
	live := make(map[int32]bool)
	for _, b := range m.Brokers {
		h.Agents = append(h.Agents, b.NodeID)
		if _, isDown := down[b.NodeID]; isDown {
			h.DownAgents = append(h.DownAgents, b.NodeID)
		} else {
			live[b.NodeID] = true
		}
	}
	slices.Sort(h.Agents)
	slices.Sort(h.DownAgents)
	for _, t := range m.Topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			name := t.Topic + "/" + strconv.Itoa(int(p.Partition))
			switch {
			case p.Leader < 0 || errors.Is(p.Err, kerr.LeaderNotAvailable):
				h.Leaderless = append(h.Leaderless, name)
			case !live[p.Leader]:
				h.Offline = append(h.Offline, name)
			}
		}
	}
	if len(h.Agents) == 0 {
		h.Reasons = append(h.Reasons, "no agents listed")
	}
	if len(h.DownAgents) > 0 {
		h.Reasons = append(h.Reasons, fmt.Sprintf("%d agents not answering", len(h.DownAgents)))
	}
	if len(h.Leaderless) > 0 {
		h.Reasons = append(h.Reasons, fmt.Sprintf("%d leaderless partitions", len(h.Leaderless)))
	}
	if len(h.Offline) > 0 {
		h.Reasons = append(h.Reasons, fmt.Sprintf("%d offline partitions", len(h.Offline)))
	}
	h.Healthy = len(h.Reasons) == 0
	return h
}

// probeAgents sends ApiVersions to each agent m lists, all at once, and
// returns those that failed to answer within timeout.
func probeAgents(ctx context.Context, cl *kgo.Client, m kadm.Metadata, timeout time.Duration) map[int32]error {
	var (
		mu   sync.Mutex
		down = make(map[int32]error)
		wg   sync.WaitGroup
	)
	for _, b := range m.Brokers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			if _, err := cl.Broker(int(b.NodeID)).Request(ctx, kmsg.NewPtrApiVersionsRequest()); err != nil {
				mu.Lock()
				down[b.NodeID] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return down
}

// healthProbeTimeout bounds each agent's answer when --timeout is larger
// or unbounded: an agent slower than this to answer ApiVersions counts as
// down.
const healthProbeTimeout = 5 * time.Second

func newClusterHealthCmd(opts *ClientOptions) *cobra.Command {
	var format *string
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Check the cluster is healthy; exits non-zero when it is not",
		Long: "Check the cluster's health, as rpk cluster health does. Healthy means: Metadata lists\n" +
			"at least one agent, every agent it lists answers ApiVersions within --timeout (at most\n" +
			"5s), and every partition has a leader (none leaderless) that is one of the answering\n" +
			"agents (none offline). Strand keeps data in object storage, so there are no\n" +
			"under-replicated partitions to report. Prints the verdict with the reasons and exits\n" +
			"non-zero when unhealthy, so it can gate scripts and probes.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := CheckOutputFormat(*format); err != nil {
				return err
			}
			// The kgo client itself, not only kadm's, to address each
			// agent by id.
			cl, err := opts.NewClient()
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := opts.requestContext(cmd.Context())
			defer cancel()
			m, err := kadm.NewClient(cl).Metadata(ctx)
			if err != nil {
				return fmt.Errorf("metadata: %w", err)
			}
			probe := healthProbeTimeout
			if opts.Timeout > 0 {
				probe = min(probe, opts.Timeout)
			}
			h := assessHealth(m, probeAgents(ctx, cl, m, probe))
			err = WriteOutput(cmd.OutOrStdout(), *format, h, func(w io.Writer) error {
				t := newTable(w)
				t.row("HEALTHY", h.Healthy)
				if !h.Healthy {
					t.row("UNHEALTHY-REASONS", fmt.Sprint(h.Reasons))
				}
				t.row("CONTROLLER", h.Controller)
				t.row("AGENTS", fmt.Sprint(h.Agents))
				t.row("DOWN-AGENTS", fmt.Sprint(h.DownAgents))
				t.row("LEADERLESS-PARTITIONS", fmt.Sprint(h.Leaderless))
				t.row("OFFLINE-PARTITIONS", fmt.Sprint(h.Offline))
				return t.flush()
			})
			if err != nil {
				return err
			}
			if !h.Healthy {
				return fmt.Errorf("%w: %v", ErrUnhealthy, h.Reasons)
			}
			return nil
		},
	}
	format = addOutputFlag(cmd)
	return cmd
}
