package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.yaml.in/yaml/v3"

	"github.com/strandkafka/strand/internal/agent"
)

// TestClusterInfo runs `cluster info` against a real agent, in each
// output format.
func TestClusterInfo(t *testing.T) {
	a := startAgent(t)
	brokers := a.KafkaAddr()
	mustRun(t, brokers, "", "topic", "create", "a", "-p", "3")
	mustRun(t, brokers, "", "topic", "create", "b", "-p", "2")
	m, err := adminClient(t, brokers).Metadata(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	partitions := 0
	for _, td := range m.Topics {
		partitions += len(td.Partitions)
	}
	if len(m.Brokers) != 1 || m.Cluster == "" || len(m.Topics) < 2 {
		t.Fatalf("the agent's metadata: %+v", m)
	}
	want := clusterInfo{
		ClusterID:  m.Cluster,
		Controller: m.Controller,
		Agents:     []clusterAgent{{NodeID: m.Brokers[0].NodeID, Addr: brokers}},
		Topics:     len(m.Topics),
		Partitions: partitions,
	}

	r := mustRun(t, brokers, "", "cluster", "info")
	rs := rows(r.stdout)
	for _, row := range [][]string{
		{"CLUSTER", want.ClusterID},
		{"CONTROLLER", strconv.Itoa(int(want.Controller))},
		{"TOPICS", strconv.Itoa(want.Topics)},
		{"PARTITIONS", strconv.Itoa(want.Partitions)},
		{"AGENT", "ADDRESS", "RACK"},
		{strconv.Itoa(int(want.Agents[0].NodeID)), brokers, "-"},
	} {
		if got := findRow(rs, row[0]); !slices.Equal(got, row) {
			t.Errorf("row %v, want %v:\n%s", got, row, r.stdout)
		}
	}

	var got clusterInfo
	r = mustRun(t, brokers, "", "cluster", "info", "--format", "json")
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("json: %v\n%s", err, r.stdout)
	}
	if !equalInfo(got, want) {
		t.Errorf("json = %+v, want %+v", got, want)
	}
	got = clusterInfo{}
	r = mustRun(t, brokers, "", "cluster", "info", "--format", "yaml")
	if err := yaml.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("yaml: %v\n%s", err, r.stdout)
	}
	if !equalInfo(got, want) {
		t.Errorf("yaml = %+v, want %+v", got, want)
	}
}

func equalInfo(a, b clusterInfo) bool {
	return a.ClusterID == b.ClusterID && a.Controller == b.Controller && a.Topics == b.Topics &&
		a.Partitions == b.Partitions && slices.Equal(a.Agents, b.Agents)
}

// TestClusterHealth: a running agent is healthy (exit 0); a cluster with
// an agent that does not answer is not, naming the agent and the
// partitions it leads, and the command fails.
func TestClusterHealth(t *testing.T) {
	t.Run("healthy agent", func(t *testing.T) {
		brokers := startAgent(t).KafkaAddr()
		mustRun(t, brokers, "", "topic", "create", "a", "-p", "2")
		r := mustRun(t, brokers, "", "cluster", "health", "--format", "json")
		var h clusterHealth
		if err := json.Unmarshal([]byte(r.stdout), &h); err != nil {
			t.Fatalf("json: %v\n%s", err, r.stdout)
		}
		if !h.Healthy || len(h.Agents) != 1 || len(h.DownAgents)+len(h.Leaderless)+len(h.Offline) != 0 {
			t.Fatalf("health = %+v, want healthy", h)
		}
		r = mustRun(t, brokers, "", "cluster", "health")
		if got := findRow(rows(r.stdout), "HEALTHY"); !slices.Equal(got, []string{"HEALTHY", "true"}) {
			t.Fatalf("text output:\n%s", r.stdout)
		}
	})

	t.Run("agent down", func(t *testing.T) {
		c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(4, "a"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		// Node 1 drops every connection at its first request, as a
		// hung or dead agent would fail a probe.
		c.ControlKey(int16(kmsg.ApiVersions), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if c.CurrentNode() == 1 {
				return nil, errors.New("down"), true
			}
			return nil, nil, false
		})
		var onOne []string
		seed := c.ListenAddrs()[0]
		m, err := adminClient(t, seed).Metadata(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m.Topics["a"].Partitions.Sorted() {
			if p.Leader == 1 {
				onOne = append(onOne, "a/"+strconv.Itoa(int(p.Partition)))
			}
		}

		r := run(t, seed, "", "cluster", "health", "--format", "json")
		if !errors.Is(r.err, ErrUnhealthy) {
			t.Fatalf("err = %v, want ErrUnhealthy\n%s", r.err, r.stdout)
		}
		var h clusterHealth
		if err := json.Unmarshal([]byte(r.stdout), &h); err != nil {
			t.Fatalf("json: %v\n%s", err, r.stdout)
		}
		if h.Healthy || !slices.Equal(h.DownAgents, []int32{1}) || !slices.Equal(h.Offline, onOne) {
			t.Fatalf("health = %+v, want agent 1 down and %v offline", h, onOne)
		}
	})
}

// TestAssessHealth covers what a live cluster rarely shows: partitions
// without a leader, or led by an agent Metadata does not list.
func TestAssessHealth(t *testing.T) {
	m := kadm.Metadata{
		Controller: 0,
		Brokers:    kadm.BrokerDetails{{NodeID: 0}, {NodeID: 1}},
		Topics: kadm.TopicDetails{"t": {Topic: "t", Partitions: kadm.PartitionDetails{
			0: {Partition: 0, Leader: 0},
			1: {Partition: 1, Leader: -1},
			2: {Partition: 2, Leader: 7},
			3: {Partition: 3, Leader: 1, Err: kerr.LeaderNotAvailable},
			4: {Partition: 4, Leader: 1},
		}}},
	}
	h := assessHealth(m, nil)
	if h.Healthy || !slices.Equal(h.Leaderless, []string{"t/1", "t/3"}) || !slices.Equal(h.Offline, []string{"t/2"}) || len(h.Reasons) != 2 {
		t.Fatalf("health = %+v", h)
	}
	delete(m.Topics["t"].Partitions, 1)
	delete(m.Topics["t"].Partitions, 2)
	delete(m.Topics["t"].Partitions, 3)
	if h := assessHealth(m, nil); !h.Healthy {
		t.Fatalf("health of a whole cluster = %+v", h)
	}
	if h := assessHealth(m, map[int32]error{1: errors.New("down")}); h.Healthy || !slices.Equal(h.Offline, []string{"t/4"}) {
		t.Fatalf("health with agent 1 down = %+v", h)
	}
	if h := assessHealth(kadm.Metadata{}, nil); h.Healthy {
		t.Fatalf("health of a cluster with no agents = %+v", h)
	}
}

// TestClusterConfig runs `cluster config` against a real agent: a
// cluster-wide value, one agent's own value over it, delete, dry run,
// and the agent's errors for names it refuses.
func TestClusterConfig(t *testing.T) {
	a := startAgent(t)
	brokers := a.KafkaAddr()
	m, err := adminClient(t, brokers).BrokerMetadata(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	node := strconv.Itoa(int(m.Brokers[0].NodeID))
	const key = "log.retention.ms"
	get := func(t *testing.T, args ...string) []string {
		t.Helper()
		r := mustRun(t, brokers, "", append([]string{"cluster", "config", "get", key}, args...)...)
		return findRow(rows(r.stdout), key)
	}

	if r := run(t, brokers, "", "cluster", "config", "get", key); !errors.Is(r.err, ErrUnknownConfig) {
		t.Fatalf("get of an unset cluster-wide config: err = %v, want ErrUnknownConfig", r.err)
	}
	r := mustRun(t, brokers, "", "cluster", "config", "set", key+"=3600000")
	if want := [][]string{{"RESOURCE", "STATUS"}, {"cluster", "OK"}}; !equalRows(rows(r.stdout), want) {
		t.Fatalf("set printed:\n%s", r.stdout)
	}
	if got, want := get(t), []string{key, "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"}; !slices.Equal(got, want) {
		t.Fatalf("cluster-wide get = %v, want %v", got, want)
	}
	if got, want := get(t, "--node", node), []string{key, "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"}; !slices.Equal(got, want) {
		t.Fatalf("agent get = %v, want %v", got, want)
	}

	mustRun(t, brokers, "", "cluster", "config", "set", key+"=7200000", "--node", node)
	if got, want := get(t, "--node", node), []string{key, "7200000", "DYNAMIC_BROKER_CONFIG"}; !slices.Equal(got, want) {
		t.Fatalf("agent get after an agent set = %v, want %v", got, want)
	}
	r = mustRun(t, brokers, "", "cluster", "config", "set", key+"=1", "--node", node, "--dry-run")
	if !strings.Contains(r.stdout, "dry run") {
		t.Errorf("--dry-run printed:\n%s", r.stdout)
	}
	if got := get(t, "--node", node); got[1] != "7200000" {
		t.Fatalf("--dry-run changed the value: %v", got)
	}

	var list []brokerConfig
	r = mustRun(t, brokers, "", "cluster", "config", "list", "--format", "json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("list json: %v\n%s", err, r.stdout)
	}
	if len(list) != 1 || list[0].Name != key || list[0].Value == nil || *list[0].Value != "3600000" {
		t.Fatalf("cluster-wide list = %+v, want %s=3600000 alone", list, key)
	}

	mustRun(t, brokers, "", "cluster", "config", "delete", key, "--node", node)
	if got := get(t, "--node", node); got[1] != "3600000" {
		t.Fatalf("agent get after the agent delete = %v, want the cluster-wide value back", got)
	}
	mustRun(t, brokers, "", "cluster", "config", "delete", key)
	r = mustRun(t, brokers, "", "cluster", "config", "list")
	if want := [][]string{{"NAME", "VALUE", "SOURCE"}}; !equalRows(rows(r.stdout), want) {
		t.Fatalf("cluster-wide list after delete:\n%s", r.stdout)
	}

	r = run(t, brokers, "", "cluster", "config", "set", "no.such.config=1")
	if !errors.Is(r.err, kerr.InvalidConfig) || !strings.Contains(r.stdout, "INVALID_CONFIG") {
		t.Fatalf("set of an unknown config: err = %v, want INVALID_CONFIG shown\n%s", r.err, r.stdout)
	}
	for _, bad := range [][]string{{"set", "novalue"}, {"set", "a=1", "a=2"}, {"delete", ""}, {"list", "--format", "xml"}} {
		if r := run(t, "127.0.0.1:1", "", append([]string{"cluster", "config"}, bad...)...); !errors.Is(r.err, ErrUsage) {
			t.Errorf("config %v: err = %v, want ErrUsage", bad, r.err)
		}
	}
}

// TestClusterInfoZones: with --http, `cluster info` shows what the agent
// counted by zone: a request of a client naming the agent's zone in its
// client.id is a hit, the CLI's own requests (no zone) unaware.
func TestClusterInfoZones(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), commandDeadline)
	defer cancel()
	a, err := agent.Start(ctx, agent.Config{
		DataDir: t.TempDir(), KafkaListen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0",
		SnapshotInterval: agent.SnapshotsOff, Rack: "zone-a",
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(context.Background()) })
	brokers := a.KafkaAddr()
	mustRun(t, brokers, "", "topic", "create", "z", "-p", "1")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ClientID("app,ws_az=zone-a"), kgo.DefaultProduceTopic("z"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	r := mustRun(t, brokers, "", "cluster", "info", "--http", a.HTTPAddr())
	rs := rows(r.stdout)
	if got := findRow(rs, "AGENT"); !slices.Equal(got, []string{"AGENT", "ADDRESS", "RACK"}) {
		t.Errorf("agents header %v:\n%s", got, r.stdout)
	}
	var hitRow []string
	for _, row := range rs {
		if len(row) == 8 && row[1] == "zone-a" {
			hitRow = row
		}
	}
	if hitRow == nil || hitRow[2] == "0.0%" || hitRow[4] == "0.0%" {
		t.Errorf("want a zone row of zone-a with hits and unaware requests, got %v:\n%s", hitRow, r.stdout)
	}

	var info clusterInfo
	r = mustRun(t, brokers, "", "cluster", "info", "--http", a.HTTPAddr(), "--format", "json")
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatalf("json: %v\n%s", err, r.stdout)
	}
	if len(info.Agents) != 1 || info.Agents[0].Rack != "zone-a" || info.Agents[0].Zones == nil {
		t.Fatalf("agents %+v, want one of rack zone-a with zone traffic", info.Agents)
	}
	z := info.Agents[0].Zones
	var hitBytes int64
	for _, b := range z.Bytes {
		if b.ClientZone == "zone-a" && b.Crossed == "no" && b.Direction == "in" {
			hitBytes += b.Bytes
		}
	}
	if z.Requests.Hit == 0 || z.Requests.Unaware == 0 || hitBytes == 0 {
		t.Errorf("zone traffic %+v: want hits, unaware requests and bytes in from zone-a", z)
	}
}
