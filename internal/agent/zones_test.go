package agent_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

// zoneNames are the zones of TestZones' agents, one agent each.
var zoneNames = []string{"a", "b", "c"}

// zoneHints are the client.id keys TestZones' producers name their zone
// with in its client.id run: Strand's and two other systems'.
var zoneHints = map[string]string{"a": "ws_az=a", "b": "strand_zone=b", "c": "app,automq_az=c"}

// maxCrossPerProduced is the acceptance bound of issue 28: bytes that
// cross zones, per record byte produced.
const maxCrossPerProduced = 0.05

// recordBytes is about the size of TestZones' records.
const recordBytes = 1024

// TestZones: three agents in zones a, b and c on one log; in each zone a
// producer writing its zone's topic (its zone learned from the listener
// it connects to, or from its client.id) and a consumer group reading
// every topic (its zone from client.rack). Bytes crossing zones, counted
// by the zone metrics and by the per-topic byte counters, stay under
// maxCrossPerProduced per byte produced. Then the agent of zone b stops:
// its clients are served by the others and nothing is lost; it comes
// back, and so do they. The runs share an in-memory log but one, whose
// log is PostgreSQL's.
func TestZones(t *testing.T) {
	// mem:// logs live as long as the process: a name of its own each
	// run, so -count=N starts afresh.
	memLog := func(t *testing.T) string {
		return fmt.Sprintf("mem://%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
	}
	for _, tc := range []struct {
		name       string
		byListener bool
		log        func(t *testing.T) string
	}{
		{"listener", true, memLog},
		{"client.id", false, memLog},
		{"postgres", true, func(t *testing.T) string {
			u, err := url.Parse(pgtest.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("log", fmt.Sprintf("agent-zones-%d", time.Now().UnixNano()))
			u.RawQuery = q.Encode()
			return u.String()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testZones(t, tc.byListener, tc.log(t)) })
	}
}

func zoneConfig(t *testing.T, dir, logURL, store string, i int) agent.Config {
	var ls, protos, racks []string
	ls = append(ls, "PLAINTEXT://127.0.0.1:0")
	for _, z := range zoneNames {
		name := zoneListener(z)
		ls = append(ls, name+"://127.0.0.1:0")
		protos = append(protos, name+":PLAINTEXT")
		racks = append(racks, name+":"+z)
	}
	return agent.Config{
		DataDir: dir, NodeID: int32(i + 1), Log: logURL, ObjStore: store,
		Listeners:                   strings.Join(ls, ","),
		ListenerSecurityProtocolMap: strings.Join(protos, ","),
		ListenerRacks:               strings.Join(racks, ","),
		Rack:                        zoneNames[i],
	}
}

func zoneListener(zone string) string { return "CLIENT_" + strings.ToUpper(zone) }

func testZones(t *testing.T, byListener bool, logURL string) {
	shared := t.TempDir()
	store := "file://" + filepath.ToSlash(filepath.Join(shared, "objects"))
	var cfgs []agent.Config
	agents := make([]*agent.Agent, len(zoneNames))
	for i := range zoneNames {
		cfgs = append(cfgs, zoneConfig(t, t.TempDir(), logURL, store, i))
		agents[i] = startWith(t, cfgs[i], nil)
	}
	// The last agent started has applied every registration.
	checkRacks(t, agents[len(agents)-1].KafkaAddr())
	var topics []string
	for _, z := range zoneNames {
		topics = append(topics, "zone-"+z)
		createTopic(t, agents[0].KafkaAddr(), "zone-"+z, 6)
	}

	// Every client knows every agent to start from, so losing one
	// loses no client; metadata is refreshed often, so a client sees
	// an agent come back within the test.
	fresh := []kgo.Opt{kgo.MetadataMaxAge(200 * time.Millisecond), kgo.MetadataMinAge(20 * time.Millisecond)}
	seeds := func(listener string) []string {
		var s []string
		for _, a := range agents {
			s = append(s, a.ListenerAddr(listener))
		}
		return s
	}
	producers := map[string]*kgo.Client{}
	for _, z := range zoneNames {
		opts := append([]kgo.Opt{kgo.DefaultProduceTopic("zone-" + z)}, fresh...)
		if byListener {
			opts = append(opts, kgo.SeedBrokers(seeds(zoneListener(z))...))
		} else {
			opts = append(opts, kgo.SeedBrokers(seeds("PLAINTEXT")...), kgo.ClientID(zoneHints[z]))
		}
		producers[z] = client(t, "", opts...)
	}
	consumed := newZoneConsumers(t, seeds("PLAINTEXT"), topics, fresh)

	var produced []string
	ctx, cancel := context.WithTimeout(context.Background(), 4*opTimeout)
	defer cancel()
	produceRound := func(round int) {
		t.Helper()
		for _, z := range zoneNames {
			var rs []*kgo.Record
			for i := range 200 {
				// Random bytes, so compression leaves the
				// volume a real load has.
				v := fmt.Appendf(nil, "%s-%d-%d-", z, round, i)
				for range recordBytes / 8 {
					v = binary.LittleEndian.AppendUint64(v, rand.Uint64())
				}
				rs = append(rs, &kgo.Record{Value: v})
				produced = append(produced, string(v))
			}
			if err := producers[z].ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatalf("produce round %d, zone %s: %v", round, z, err)
			}
		}
	}

	// All agents up.
	for round := range 5 {
		produceRound(round)
	}
	consumed.waitAll(t, ctx, produced)
	var before []zoneCounts
	for _, a := range agents {
		before = append(before, scrapeZones(t, a))
	}
	cross, crossTopics, bytesIn := crossZone(before)
	crossRead, read := consumed.crossRead()
	// Each group read all that was produced; the hook counts batches
	// without their headers, which the agent counts.
	if read < 3*bytesIn*9/10 {
		t.Errorf("the groups' hooks counted %d record bytes, want about %d (each all %d produced)", read, 3*bytesIn, bytesIn)
	}
	t.Logf("record bytes produced through another zone's agent (per-topic counters): %d; read from another zone's agent (consumers' fetch hooks): %d of %d read",
		crossTopics, crossRead, read)
	crossTopics += crossRead
	unknown := 0
	for _, c := range before {
		unknown += c.bytes[zoneKey{"in", "unknown"}] + c.bytes[zoneKey{"out", "unknown"}]
	}
	t.Logf("of the bytes crossing, %d are of clients of unknown zone (admin clients, consumers before their first Fetch)", unknown)
	t.Logf("all agents up: %d record bytes produced; crossing zones: %d bytes by the zone metrics (%.4f a byte produced), %d of records by the per-topic counters and the consumers (%.4f)",
		bytesIn, cross, float64(cross)/float64(bytesIn), crossTopics, float64(crossTopics)/float64(bytesIn))
	if bytesIn == 0 {
		t.Fatal("no record bytes counted in")
	}
	if r := float64(cross) / float64(bytesIn); r > maxCrossPerProduced {
		t.Errorf("zone metrics: %.4f bytes crossed zones a byte produced, want at most %v; counts: %+v", r, maxCrossPerProduced, before)
	}
	if r := float64(crossTopics) / float64(bytesIn); r > maxCrossPerProduced {
		t.Errorf("per-topic counters and consumers: %.4f record bytes crossed zones a byte produced, want at most %v; counts: %+v", r, maxCrossPerProduced, before)
	}
	for i, c := range before {
		t.Logf("agent of zone %s: requests %v", zoneNames[i], c.requests)
		if c.requests["hit"] == 0 {
			t.Errorf("agent of zone %s: no request from a client of its zone", zoneNames[i])
		}
	}

	// Zone b's agent stops: its clients go to the others.
	stop(t, agents[1])
	for round := 5; round < 8; round++ {
		produceRound(round)
	}
	consumed.waitAll(t, ctx, produced)
	servedB := 0
	for _, i := range []int{0, 2} {
		c := scrapeZones(t, agents[i])
		servedB += c.bytes[zoneKey{"in", "b"}] - before[i].bytes[zoneKey{"in", "b"}]
	}
	if servedB == 0 {
		t.Error("with zone b's agent down, the agents of zones a and c took no bytes from zone b's clients")
	}

	// It comes back, and so do its clients: producing until the
	// restarted agent takes zone b's produce and serves zone b's group.
	agents[1] = startWith(t, cfgs[1], nil)
	round := 8
	for {
		produceRound(round)
		round++
		c := scrapeZones(t, agents[1])
		if c.bytes[zoneKey{"in", "b"}] > 0 && c.topicOut > 0 && c.requests["hit"] > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("zone b's clients did not come back to its agent: %+v", c)
		}
	}
	consumed.waitAll(t, ctx, produced)
	t.Logf("%d records produced in %d rounds; every group read them all", len(produced), round)
}

// zoneConsumers are a consumer group a zone, each reading every topic,
// and what each has read.
type zoneConsumers struct {
	mu struct {
		sync.Mutex
		seen map[string]map[string]bool // zone -> value
		// read are the record bytes each group's client read, by the
		// zone of the agent that served them (kgo.HookFetchBatchRead).
		read map[string]map[string]int
		// changed is closed and replaced when a record comes.
		changed chan struct{}
	}
}

func newZoneConsumers(t *testing.T, seeds, topics []string, opts []kgo.Opt) *zoneConsumers {
	t.Helper()
	c := new(zoneConsumers)
	c.mu.seen = map[string]map[string]bool{}
	c.mu.read = map[string]map[string]int{}
	c.mu.changed = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, z := range zoneNames {
		c.mu.seen[z] = map[string]bool{}
		c.mu.read[z] = map[string]int{}
		// Clients of different zones run on different hosts; here
		// they share one address, and their client ids tell them
		// apart (kafka's zoneMemo).
		// franz-go stays on a preferred read replica that went
		// away until it rechecks (30 minutes by default) unless the
		// leader Metadata names changes meanwhile; the Java client
		// goes back to the leader at once.
		cl := client(t, "", append([]kgo.Opt{
			kgo.ClientID("consumer-" + z), kgo.RecheckPreferredReplicaInterval(time.Second),
			kgo.WithHooks(fetchHook{c, z}),
			kgo.SeedBrokers(seeds...), kgo.ConsumerGroup("zone-group-" + z), kgo.ConsumeTopics(topics...),
			kgo.Rack(z), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond),
		}, opts...)...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				c.mu.Lock()
				fs.EachRecord(func(r *kgo.Record) { c.mu.seen[z][string(r.Value)] = true })
				close(c.mu.changed)
				c.mu.changed = make(chan struct{})
				c.mu.Unlock()
			}
		}()
	}
	return c
}

// fetchHook counts the record bytes a zone's group read by the zone of
// the agent that served them.
type fetchHook struct {
	c    *zoneConsumers
	zone string
}

func (h fetchHook) OnFetchBatchRead(b kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	from := "unknown"
	if i := int(b.NodeID) - 1; i >= 0 && i < len(zoneNames) {
		from = zoneNames[i]
	}
	h.c.mu.Lock()
	h.c.mu.read[h.zone][from] += m.CompressedBytes
	h.c.mu.Unlock()
}

// crossRead returns the record bytes groups read from agents of another
// zone, and all they read.
func (c *zoneConsumers) crossRead() (cross, total int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for z, by := range c.mu.read {
		for from, n := range by {
			total += n
			if from != z {
				cross += n
			}
		}
	}
	return cross, total
}

// waitAll returns once every group has read every value of want.
func (c *zoneConsumers) waitAll(t *testing.T, ctx context.Context, want []string) {
	t.Helper()
	for {
		c.mu.Lock()
		var missing []string
		for _, z := range zoneNames {
			n := 0
			for _, v := range want {
				if !c.mu.seen[z][v] {
					n++
				}
			}
			if n > 0 {
				missing = append(missing, fmt.Sprintf("group of zone %s: %d of %d", z, n, len(want)))
			}
		}
		changed := c.mu.changed
		c.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("records not read: %v", missing)
		}
	}
}

type zoneKey struct{ direction, clientZone string }

// zoneCounts is one agent's zone and traffic counters.
type zoneCounts struct {
	zone     string
	bytes    map[zoneKey]int // strand_zone_bytes_total by direction, client zone
	requests map[string]int  // strand_zone_requests_total by result
	// topicIn are strand_topic_bytes_in_total by topic; topicOut the
	// sum of strand_topic_bytes_out_total.
	topicIn  map[string]int
	topicOut int
}

func scrapeZones(t *testing.T, a *agent.Agent) zoneCounts {
	t.Helper()
	fs := parseScrape(t, scrapeBody(t, a))
	c := zoneCounts{bytes: map[zoneKey]int{}, requests: map[string]int{}, topicIn: map[string]int{}}
	for _, m := range fs["strand_zone_bytes_total"].GetMetric() {
		l := labelMap(m.GetLabel())
		c.zone = l["agent_zone"]
		c.bytes[zoneKey{l["direction"], l["client_zone"]}] += int(sampleValue(m))
	}
	for _, m := range fs["strand_zone_requests_total"].GetMetric() {
		c.requests[labelMap(m.GetLabel())["result"]] += int(sampleValue(m))
	}
	for _, m := range fs["strand_topic_bytes_in_total"].GetMetric() {
		c.topicIn[labelMap(m.GetLabel())["topic"]] += int(sampleValue(m))
	}
	for _, m := range fs["strand_topic_bytes_out_total"].GetMetric() {
		c.topicOut += int(sampleValue(m))
	}
	return c
}

// crossZone returns the bytes that crossed zones, counted two ways, and
// the record bytes produced. By the zone metrics: every byte whose client
// zone is not its agent's, unknown zones included. By the per-topic
// counters: zone z's topic is written only by zone z's producer, so
// its bytes in at another zone's agent crossed. (Those counters cannot
// tell which zone's group a byte out went to: the consumers count that
// themselves, crossRead.)
func crossZone(cs []zoneCounts) (cross, crossTopics, produced int) {
	for _, c := range cs {
		for k, n := range c.bytes {
			if k.clientZone != c.zone {
				cross += n
			}
		}
		for topic, n := range c.topicIn {
			produced += n
			if topic != "zone-"+c.zone {
				crossTopics += n
			}
		}
	}
	return cross, crossTopics, produced
}

func labelMap(ls []*dto.LabelPair) map[string]string {
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		m[l.GetName()] = l.GetValue()
	}
	return m
}

// checkRacks checks that Metadata and DescribeCluster give each agent
// its rack.
func checkRacks(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	// A client's first request goes to its seed, the only agent it
	// knows; later ones to any agent it learned.
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, client(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, client(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, b := range md.Brokers {
		got["Metadata"] = append(got["Metadata"], fmt.Sprintf("%d:%s", b.NodeID, deref(b.Rack)))
	}
	for _, b := range dc.Brokers {
		got["DescribeCluster"] = append(got["DescribeCluster"], fmt.Sprintf("%d:%s", b.NodeID, deref(b.Rack)))
	}
	want := []string{"1:a", "2:b", "3:c"}
	for api, racks := range got {
		slices.Sort(racks)
		if !slices.Equal(racks, want) {
			t.Errorf("%s: agents %v, want %v", api, racks, want)
		}
	}
	if len(got) != 2 {
		t.Errorf("brokers listed by %v, want Metadata and DescribeCluster", got)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
