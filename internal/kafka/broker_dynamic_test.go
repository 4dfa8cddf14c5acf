package kafka

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/loglevel"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// alterBroker sets (v non-nil) or deletes dynamic broker config name at
// BROKER resource res through the seed connection, and returns the
// answer's error.
func alterBroker(t *testing.T, a *testAgent, typ kmsg.ConfigResourceType, res, name string, v *string) (*kerr.Error, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, res
	op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	op.Name, op.Value, op.Op = name, v, kmsg.IncrementalAlterConfigOpSet
	if v == nil {
		op.Op = kmsg.IncrementalAlterConfigOpDelete
	}
	rr.Configs = append(rr.Configs, op)
	req.Resources = append(req.Resources, rr)
	got := a.request(t, req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
	var msg string
	if got.ErrorMessage != nil {
		msg = *got.ErrorMessage
	}
	return kerr.TypedErrorForCode(got.ErrorCode), msg
}

// mustAlterBroker is alterBroker that must succeed.
func mustAlterBroker(t *testing.T, a *testAgent, res, name string, v *string) {
	t.Helper()
	if e, msg := alterBroker(t, a, kmsg.ConfigResourceTypeBroker, res, name, v); e != nil {
		t.Fatalf("alter %s at %q: %v %s", name, res, e, msg)
	}
}

// TestDynamicMessageMaxBytes: message.max.bytes from the flag, then set
// cluster-wide and per agent with kadm, bounds the next Produce to
// topics that do not set max.message.bytes, with no restart, and
// DescribeConfigs shows where the value came from.
func TestDynamicMessageMaxBytes(t *testing.T) {
	a, _ := newDataAgent(t, nil, withDeps(func(d *Deps) {
		d.BrokerDefaults = map[string]string{"max.message.bytes": "1500"} // --message-max-bytes
	}))
	raiseToLevel3(t, a)
	a.createTopic(t, "plain", 1, nil)
	a.createTopic(t, "own", 1, map[string]*string{"max.message.bytes": kmsg.StringPtr("100000")})
	c := dial(t, a.addr)
	corr := int32(0)
	produce := func(topic string) int16 {
		t.Helper()
		corr++
		batch := batchtest.Build(t, batchtest.Options{ValueBytes: 2000})
		resp := roundTrip(t, c, corr, produceReq(9, -1, nil, rawPart{topic, 0, batch})).(*kmsg.ProduceResponse)
		return producePartitions(resp)[0].ErrorCode
	}
	const tooLarge = 10 // MESSAGE_TOO_LARGE
	if code := produce("plain"); code != tooLarge {
		t.Fatalf("2000 bytes over the flag's 1500: code %d, want MESSAGE_TOO_LARGE", code)
	}
	set := func(name, v string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: &v}
	}
	if rs, err := a.Admin.AlterBrokerConfigs(a.ctx(t), []kadm.AlterConfig{set("message.max.bytes", "3000")}); err != nil || rs[0].Err != nil {
		t.Fatalf("cluster-wide: %v %+v", err, rs)
	}
	if code := produce("plain"); code != 0 {
		t.Fatalf("2000 bytes after message.max.bytes=3000 cluster-wide: code %d", code)
	}
	if rs, err := a.Admin.AlterBrokerConfigs(a.ctx(t), []kadm.AlterConfig{set("message.max.bytes", "1024")}, testNodeID); err != nil || rs[0].Err != nil {
		t.Fatalf("per agent: %v %+v", err, rs)
	}
	if code := produce("plain"); code != tooLarge {
		t.Fatalf("agent's message.max.bytes=1024 over the cluster's 3000: code %d, want MESSAGE_TOO_LARGE", code)
	}
	if code := produce("own"); code != 0 {
		t.Fatalf("topic's own max.message.bytes: code %d", code)
	}

	brokers, err := a.Admin.DescribeBrokerConfigs(a.ctx(t), testNodeID)
	if err != nil || brokers[0].Err != nil {
		t.Fatalf("describe: %v %+v", err, brokers)
	}
	mc := configOf(t, brokers[0], "message.max.bytes")
	var chain []string
	for _, s := range mc.Synonyms {
		chain = append(chain, *s.Value+" "+s.Source.String())
	}
	want := "1024 DYNAMIC_BROKER_CONFIG, 3000 DYNAMIC_DEFAULT_BROKER_CONFIG, 1500 STATIC_BROKER_CONFIG, 1048588 DEFAULT_CONFIG"
	if mc.MaybeValue() != "1024" || mc.Source != kmsg.ConfigSourceDynamicBrokerConfig || strings.Join(chain, ", ") != want {
		t.Errorf("message.max.bytes %q from %v, synonyms %v, want %s", mc.MaybeValue(), mc.Source, chain, want)
	}
	topics, err := a.Admin.DescribeTopicConfigs(a.ctx(t), "plain")
	if err != nil {
		t.Fatal(err)
	}
	if tc := configOf(t, topics[0], "max.message.bytes"); tc.MaybeValue() != "1024" || tc.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Errorf("topic max.message.bytes %q from %v", tc.MaybeValue(), tc.Source)
	}
	if e, _ := alterBroker(t, a, kmsg.ConfigResourceTypeBroker, "", "message.max.bytes", kmsg.StringPtr("-1")); e != kerr.InvalidConfig {
		t.Errorf("message.max.bytes=-1: %v, want INVALID_CONFIG", e)
	}
}

// describeBrokerConfig describes broker config name of the test agent,
// with synonyms.
func describeBrokerConfig(t *testing.T, a *testAgent, name string) configResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, strconv.Itoa(testNodeID)
	rr.ConfigNames = []string{name}
	req.Resources = append(req.Resources, rr)
	req.IncludeSynonyms = true
	resp := a.request(t, req).(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources[0].Configs) != 1 {
		t.Fatalf("configs %+v", resp.Resources[0])
	}
	return resp.Resources[0].Configs[0]
}

// TestDynamicCleanerConfigs: the cleaner's dynamic configs show the
// flag's value as STATIC_BROKER_CONFIG, Strand's default as
// DEFAULT_CONFIG, a value set cluster-wide as DYNAMIC_DEFAULT_BROKER_CONFIG
// (the cleaner's use of them is tested in package cleaner), and values
// out of range are INVALID_CONFIG.
func TestDynamicCleanerConfigs(t *testing.T) {
	a := newTestAgent(t, withDeps(func(d *Deps) { d.LogCleanerBackoffMs = 20000 }))
	raiseToLevel3(t, a)
	check := func(name, value string, src kmsg.ConfigSource, synonyms int) {
		t.Helper()
		c := describeBrokerConfig(t, a, name)
		if *c.Value != value || c.Source != src || c.ReadOnly || len(c.ConfigSynonyms) != synonyms {
			t.Errorf("%s = %q from %v (read-only %v, %d synonyms), want %q from %v", name, *c.Value, c.Source, c.ReadOnly, len(c.ConfigSynonyms), value, src)
		}
	}
	check("log.cleaner.backoff.ms", "20000", kmsg.ConfigSourceStaticBrokerConfig, 2)
	check("log.cleaner.dedupe.buffer.size", "134217728", kmsg.ConfigSourceDefaultConfig, 1)
	mustAlterBroker(t, a, "", "log.cleaner.backoff.ms", kmsg.StringPtr("5000"))
	mustAlterBroker(t, a, "", "log.cleaner.dedupe.buffer.size", kmsg.StringPtr("1048576"))
	check("log.cleaner.backoff.ms", "5000", kmsg.ConfigSourceDynamicDefaultBrokerConfig, 3)
	check("log.cleaner.dedupe.buffer.size", "1048576", kmsg.ConfigSourceDynamicDefaultBrokerConfig, 2)
	// (max.connections.per.ip=0 admits only the overrides' addresses;
	// this agent has none.)
	for name, bad := range map[string]string{"log.cleaner.backoff.ms": "0", "log.cleaner.dedupe.buffer.size": "10", "max.connections.per.ip": "0"} {
		if e, _ := alterBroker(t, a, kmsg.ConfigResourceTypeBroker, "", name, &bad); e != kerr.InvalidConfig {
			t.Errorf("%s=%s: %v, want INVALID_CONFIG", name, bad, e)
		}
	}
}

// TestDynamicConnectionLimits: max.connections.per.ip changed at runtime
// refuses the next connection over it, the agent's value wins over the
// cluster-wide one, and deleting it admits again; DescribeConfigs shows
// the flag's value as STATIC_BROKER_CONFIG until then.
func TestDynamicConnectionLimits(t *testing.T) {
	a := newTestAgent(t, func(c *agentConfig) {
		c.Server.MaxConnsPerIP = 50
		c.Server.MaxConnsPerIPOverrides = map[netip.Addr]int{netip.MustParseAddr("::1"): 9, netip.MustParseAddr("10.0.0.1"): 2}
	})
	raiseToLevel3(t, a)
	self := strconv.Itoa(testNodeID)
	describe := func() configResourceConfig { return describeBrokerConfig(t, a, "max.connections.per.ip") }
	if c := describe(); *c.Value != "50" || c.Source != kmsg.ConfigSourceStaticBrokerConfig || c.ReadOnly ||
		len(c.ConfigSynonyms) != 2 || *c.ConfigSynonyms[1].Value != "1000" {
		t.Fatalf("before: %q from %v (read-only %v), synonyms %+v", *c.Value, c.Source, c.ReadOnly, c.ConfigSynonyms)
	}
	if c := describeBrokerConfig(t, a, perIPOverridesConfig); *c.Value != "10.0.0.1:2,[::1]:9" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("static overrides %q from %v", *c.Value, c.Source)
	}
	// A fresh address, so the test client's connections do not count.
	from := netip.MustParseAddr("127.0.0.2")
	connect := func() net.Conn {
		t.Helper()
		d := net.Dialer{Timeout: guard, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(from, 0))}
		c, err := d.Dial("tcp", a.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	refused := func() {
		t.Helper()
		expectClosed(t, connect())
		if cc := a.obs.waitClose(t); !errors.Is(cc.reason, ErrTooManyConnsPerIP) {
			t.Fatalf("close reason %v, want ErrTooManyConnsPerIP", cc.reason)
		}
	}
	mustAlterBroker(t, a, "", "max.connections.per.ip", kmsg.StringPtr("3"))
	mustAlterBroker(t, a, self, "max.connections.per.ip", kmsg.StringPtr("1"))
	if c := describe(); *c.Value != "1" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("per agent: %q from %v", *c.Value, c.Source)
	}
	checkAPIVersions(t, connect(), a.Server)
	refused()
	mustAlterBroker(t, a, self, "max.connections.per.ip", nil)
	if c := describe(); *c.Value != "3" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("cluster-wide: %q from %v", *c.Value, c.Source)
	}
	checkAPIVersions(t, connect(), a.Server)
	checkAPIVersions(t, connect(), a.Server)
	refused()
	// 127.0.0.2 holds 3; an override lets it have one more.
	mustAlterBroker(t, a, self, perIPOverridesConfig, kmsg.StringPtr("127.0.0.2:4,[::1]:7"))
	checkAPIVersions(t, connect(), a.Server)
	refused()
	if c := describeBrokerConfig(t, a, perIPOverridesConfig); *c.Value != "127.0.0.2:4,[::1]:7" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Errorf("overrides %q from %v", *c.Value, c.Source)
	}
	if e, _ := alterBroker(t, a, kmsg.ConfigResourceTypeBroker, "", perIPOverridesConfig, kmsg.StringPtr("db.example:3")); e != kerr.InvalidConfig {
		t.Errorf("a host name override: %v, want INVALID_CONFIG", e)
	}

	for _, bad := range []string{"-1", "many"} {
		if e, _ := alterBroker(t, a, kmsg.ConfigResourceTypeBroker, "", "max.connections.per.ip", &bad); e != kerr.InvalidConfig {
			t.Errorf("max.connections.per.ip=%s: %v, want INVALID_CONFIG", bad, e)
		}
	}
	if e, _ := alterBroker(t, a, kmsg.ConfigResourceTypeBroker, "", "max.connections", kmsg.StringPtr("0")); e != kerr.InvalidConfig {
		t.Errorf("max.connections=0: %v, want INVALID_CONFIG", e)
	}
}

// TestBrokerLoggers: DescribeConfigs on the BROKER_LOGGER resource lists
// the agent's loggers, IncrementalAlterConfigs changes one's level at
// once (debug lines appear), DELETE returns it to root's, and the
// refusals are Kafka's.
func TestBrokerLoggers(t *testing.T) {
	var out bytes.Buffer // only this goroutine logs to it
	levels := loglevel.New()
	root := slog.New(levels.Handler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: loglevel.Lowest})))
	group := root.With("component", "group")
	a := newTestAgent(t, withDeps(func(d *Deps) { d.Loggers = levels }))
	self := strconv.Itoa(testNodeID)

	describe := func() map[string]string {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, self
		req.Resources = append(req.Resources, rr)
		res := a.request(t, req).(*kmsg.DescribeConfigsResponse).Resources[0]
		if res.ErrorCode != 0 {
			t.Fatalf("describe: code %d", res.ErrorCode)
		}
		m := map[string]string{}
		for _, c := range res.Configs {
			if c.Source != kmsg.ConfigSourceDynamicBrokerLoggerConfig || c.ReadOnly {
				t.Errorf("%s from %v, read-only %v", c.Name, c.Source, c.ReadOnly)
			}
			m[c.Name] = *c.Value
		}
		return m
	}
	if m := describe(); len(m) != 2 || m["root"] != "INFO" || m["group"] != "INFO" {
		t.Fatalf("loggers %v", m)
	}
	group.Debug("hidden before")
	if e, msg := alterBroker(t, a, kmsg.ConfigResourceTypeBrokerLogger, self, "group", kmsg.StringPtr("DEBUG")); e != nil {
		t.Fatalf("set group DEBUG: %v %s", e, msg)
	}
	group.Debug("shown after")
	root.Debug("root stays at info")
	if m := describe(); m["group"] != "DEBUG" || m["root"] != "INFO" {
		t.Fatalf("after set: %v", m)
	}
	if e, msg := alterBroker(t, a, kmsg.ConfigResourceTypeBrokerLogger, self, "group", nil); e != nil {
		t.Fatalf("delete group: %v %s", e, msg)
	}
	group.Debug("hidden again")
	if e, _ := alterBroker(t, a, kmsg.ConfigResourceTypeBrokerLogger, self, "root", kmsg.StringPtr("warn")); e != nil {
		t.Fatalf("set root WARN: %v", e)
	}
	group.Info("hidden under root's warn")
	group.Warn("shown at warn")
	logs := out.String()
	for _, want := range []string{"shown after", "shown at warn"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	for _, not := range []string{"hidden", "root stays"} {
		if strings.Contains(logs, not) {
			t.Errorf("log has %q:\n%s", not, logs)
		}
	}

	for _, tt := range []struct {
		res, name string
		v         *string
		want      *kerr.Error
	}{
		{self, "nope", kmsg.StringPtr("DEBUG"), kerr.InvalidConfig},
		{self, "group", kmsg.StringPtr("LOUD"), kerr.InvalidConfig},
		{self, "root", nil, kerr.InvalidRequest},
		{"99", "group", kmsg.StringPtr("DEBUG"), kerr.InvalidRequest},
		{"", "group", kmsg.StringPtr("DEBUG"), kerr.InvalidRequest},
	} {
		if e, _ := alterBroker(t, a, kmsg.ConfigResourceTypeBrokerLogger, tt.res, tt.name, tt.v); e != tt.want {
			t.Errorf("%q %s=%v: %v, want %v", tt.res, tt.name, tt.v, e, tt.want)
		}
	}
	if m := describe(); m["group"] != "WARN" || m["root"] != "WARN" {
		t.Fatalf("after refusals: %v", m)
	}
}
