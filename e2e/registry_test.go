package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/strandkafka/strand/compat"
)

// The schema registry as its users meet it: served by `strand serve`
// (--schema-registry-listen), used by client libraries written against
// Confluent's registry, and by several agents sharing one log.
//
//	go test ./e2e -run 'TestRegistry' -v

// orderAvro is the Avro schema the clients' scripts register
// (clients/registry_kafkajs.js): the same text, so franz-go finds its id.
const orderAvro = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}`

// order is one record of the clients' test: {"id": i, "name": "order-i"}.
type order struct {
	ID   int64  `avro:"id" json:"id"`
	Name string `avro:"name" json:"name"`
}

func wantOrders(n int) []order {
	out := make([]order, n)
	for i := range out {
		out[i] = order{ID: int64(i), Name: fmt.Sprintf("order-%d", i)}
	}
	return out
}

// registryAgent is one `strand serve` with the registry on.
type registryAgent struct {
	kafka, http, registry string
	args                  []string
	proc                  *agentProcess
}

func startRegistryAgent(t *testing.T, extra ...string) *registryAgent {
	t.Helper()
	a := &registryAgent{kafka: freeAddr(t), http: freeAddr(t), registry: freeAddr(t)}
	a.args = append([]string{"--kafka-listen", a.kafka, "--http-listen", a.http,
		"--schema-registry-listen", a.registry}, extra...)
	a.proc = startProcess(t, a.http, a.args...)
	return a
}

func (a *registryAgent) url() string { return "http://" + a.registry }

func registryClient(t *testing.T, url string) *sr.Client {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// clientScript runs one of compat/clients' registry scripts and returns
// its one JSON line, decoded into out; a script that reports an error
// fails the test.
func clientScript(t *testing.T, argv, env []string, out any) {
	t.Helper()
	line, failure := runClientScript(t, argv, env)
	if failure != "" {
		t.Fatal(failure)
	}
	if err := json.Unmarshal([]byte(line), out); err != nil {
		t.Fatalf("%s: result %q: %v", strings.Join(argv, " "), line, err)
	}
}

// runClientScript runs a script and returns its last line, or why it
// failed.
func runClientScript(t *testing.T, argv, env []string) (line, failure string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	line = strings.TrimSpace(string(stdout))
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal([]byte(line), &e)
	if err != nil || e.Error != "" {
		return line, fmt.Sprintf("%s: %v %s\nstdout: %s\nstderr: %s", strings.Join(argv, " "), err, e.Error, stdout, stderr.String())
	}
	return line, ""
}

// createValidatedTopic creates a topic whose values the agent checks
// against the registry (confluent.value.schema.validation): every
// record the clients write must be in Confluent's wire format, with a
// schema registered under <topic>-value, and decode with it.
func createValidatedTopic(t *testing.T, addr, topic string) {
	t.Helper()
	on := "true"
	createTopicConfigs(t, addr, topic, 1, map[string]*string{"confluent.value.schema.validation": &on})
}

// registryClients finds node with kafkajs and
// @kafkajs/confluent-schema-registry, and Debian's python3 with
// confluent-kafka and the modules its JSON serializer needs. Missing
// ones skip, except under CI, where scripts/test installs them.
func registryClients(t *testing.T) (node, python []string, nodeEnv []string) {
	t.Helper()
	nodeBin := requireCommand(t, "node")
	dir, err := compat.KafkaJSDir()
	if err != nil {
		t.Fatal(err)
	}
	modules := filepath.Join(dir, "node_modules")
	for _, m := range []string{"kafkajs", "@kafkajs/confluent-schema-registry"} {
		requireTool(t, m, func() error {
			_, err := os.Stat(filepath.Join(modules, m, "package.json"))
			return err
		})
	}
	requirePythonModule(t, "confluent_kafka.schema_registry.json_schema", "python3-confluent-kafka python3-requests python3-jsonschema")
	scripts, err := filepath.Abs("../compat/clients")
	if err != nil {
		t.Fatal(err)
	}
	return []string{nodeBin, filepath.Join(scripts, "registry_kafkajs.js")},
		[]string{systemPython, filepath.Join(scripts, "registry_confluent_kafka.py")},
		[]string{"NODE_PATH=" + modules}
}

// consumeValues reads n records from the start of topic.
func consumeValues(t *testing.T, addr, topic string, n int) [][]byte {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var out [][]byte
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: %d of %d records: %v", topic, len(out), n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume %s: %v", topic, err) })
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r.Value) })
	}
	return out
}

// TestRegistryClients: records produced through one client library's
// serializer are read through another's, every lookup of a schema by
// its id answered by the agent's registry. kafkajs with
// @kafkajs/confluent-schema-registry (Avro, JSON Schema, Protobuf),
// confluent-kafka-python (JSON Schema) and franz-go's pkg/sr (Avro and
// JSON Schema, with hamba/avro and encoding/json) are three
// implementations of Confluent's wire format and REST API, none ours.
func TestRegistryClients(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strand binary and runs node and python clients")
	}
	node, python, nodeEnv := registryClients(t)
	a := startRegistryAgent(t, "--data-dir", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := registryClient(t, a.url())
	const n = 20
	common := []string{"--bootstrap", a.kafka, "--registry", a.url(), "--count", strconv.Itoa(n)}

	type produced struct {
		ID       int `json:"id"`
		Produced int `json:"produced"`
	}
	type consumed struct {
		Records   []order `json:"records"`
		SchemaIDs []int   `json:"schema_ids"`
	}
	avroSchema := avro.MustParse(orderAvro)
	decodeAvro := func(t *testing.T, values [][]byte, wantID int) []order {
		t.Helper()
		var serde sr.Serde
		serde.Register(wantID, order{}, sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(avroSchema, b, v) }))
		out := make([]order, len(values))
		for i, v := range values {
			if err := serde.Decode(v, &out[i]); err != nil {
				t.Fatalf("franz-go decoding record %d (schema id %d): %v", i, wantID, err)
			}
		}
		return out
	}

	t.Run("kafkajs avro to franz-go", func(t *testing.T) {
		topic := "reg-kafkajs-avro"
		createValidatedTopic(t, a.kafka, topic)
		var p produced
		clientScript(t, append(append(node, "produce", "--topic", topic, "--format", "avro"), common...), nodeEnv, &p)
		// The id kafkajs got is the one franz-go's client finds for the
		// same schema under the subject, and its text parses to it.
		s, err := cl.LookupSchema(ctx, topic+"-value", sr.Schema{Schema: orderAvro})
		if err != nil || s.ID != p.ID {
			t.Fatalf("LookupSchema = %+v, %v; kafkajs registered id %d", s, err, p.ID)
		}
		byID, err := cl.SchemaByID(ctx, p.ID)
		if err != nil || avro.MustParse(byID.Schema).Fingerprint() != avroSchema.Fingerprint() {
			t.Fatalf("SchemaByID(%d) = %+v, %v", p.ID, byID, err)
		}
		if got := decodeAvro(t, consumeValues(t, a.kafka, topic, n), p.ID); !slices.Equal(got, wantOrders(n)) {
			t.Fatalf("franz-go read %v, want %v", got, wantOrders(n))
		}
	})

	t.Run("franz-go avro to kafkajs", func(t *testing.T) {
		topic := "reg-franz-avro"
		createValidatedTopic(t, a.kafka, topic)
		s, err := cl.CreateSchema(ctx, topic+"-value", sr.Schema{Schema: orderAvro})
		if err != nil {
			t.Fatal(err)
		}
		var serde sr.Serde
		serde.Register(s.ID, order{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(avroSchema, v) }))
		produceValuesOf(t, a.kafka, topic, wantOrders(n), serde.MustEncode)
		var c consumed
		clientScript(t, append(append(node, "consume", "--topic", topic), common...), nodeEnv, &c)
		if !slices.Equal(c.Records, wantOrders(n)) {
			t.Fatalf("kafkajs read %v, want %v", c.Records, wantOrders(n))
		}
	})

	t.Run("python json to franz-go and kafkajs", func(t *testing.T) {
		topic := "reg-python-json"
		createValidatedTopic(t, a.kafka, topic)
		var p produced
		clientScript(t, append(append(python, "produce", "--topic", topic), common...), nil, &p)
		s, err := cl.SchemaByID(ctx, p.ID)
		if err != nil || s.Type != sr.TypeJSON {
			t.Fatalf("SchemaByID(%d) of python's registration = %+v, %v", p.ID, s, err)
		}
		var serde sr.Serde
		serde.Register(p.ID, order{}, sr.DecodeFn(json.Unmarshal))
		values := consumeValues(t, a.kafka, topic, n)
		got := make([]order, n)
		for i, v := range values {
			if err := serde.Decode(v, &got[i]); err != nil {
				t.Fatalf("franz-go decoding python's record %d: %v", i, err)
			}
		}
		if !slices.Equal(got, wantOrders(n)) {
			t.Fatalf("franz-go read %v, want %v", got, wantOrders(n))
		}
		var c consumed
		clientScript(t, append(append(node, "consume", "--topic", topic), common...), nodeEnv, &c)
		if !slices.Equal(c.Records, wantOrders(n)) {
			t.Fatalf("kafkajs read %v, want %v", c.Records, wantOrders(n))
		}
	})

	t.Run("kafkajs json and franz-go json to python", func(t *testing.T) {
		topic := "reg-json-python"
		createValidatedTopic(t, a.kafka, topic)
		var p produced
		clientScript(t, append(append(node, "produce", "--topic", topic, "--format", "json"), common...), nodeEnv, &p)
		var c consumed
		clientScript(t, append(append(python, "consume", "--topic", topic), common...), nil, &c)
		if !slices.Equal(c.Records, wantOrders(n)) || !slices.Equal(c.SchemaIDs, []int{p.ID}) {
			t.Fatalf("python read %v (schema ids %v), want %v (id %d)", c.Records, c.SchemaIDs, wantOrders(n), p.ID)
		}

		topic = "reg-franz-json"
		createValidatedTopic(t, a.kafka, topic)
		s, err := cl.CreateSchema(ctx, topic+"-value", sr.Schema{Type: sr.TypeJSON,
			Schema: `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id","name"]}`})
		if err != nil {
			t.Fatal(err)
		}
		var serde sr.Serde
		serde.Register(s.ID, order{}, sr.EncodeFn(json.Marshal))
		produceValuesOf(t, a.kafka, topic, wantOrders(n), serde.MustEncode)
		c = consumed{}
		clientScript(t, append(append(python, "consume", "--topic", topic), common...), nil, &c)
		if !slices.Equal(c.Records, wantOrders(n)) || !slices.Equal(c.SchemaIDs, []int{s.ID}) {
			t.Fatalf("python read %v (schema ids %v), want %v (id %d)", c.Records, c.SchemaIDs, wantOrders(n), s.ID)
		}
	})

	t.Run("kafkajs protobuf", func(t *testing.T) {
		topic := "reg-kafkajs-proto"
		createTopic(t, a.kafka, topic, 1)
		var p produced
		clientScript(t, append(append(node, "produce", "--topic", topic, "--format", "protobuf"), common...), nodeEnv, &p)
		s, err := cl.SchemaByID(ctx, p.ID)
		if err != nil || s.Type != sr.TypeProtobuf || !strings.Contains(s.Schema, "message Order") {
			t.Fatalf("SchemaByID(%d) of kafkajs's Protobuf registration = %+v, %v", p.ID, s, err)
		}
		// franz-go reads the framing's schema id. (Not the message
		// indexes: this library writes none, against Confluent's wire
		// format, and strips leading zero bytes when it decodes; so its
		// Protobuf records are for its own readers only, and a topic
		// validating schemas refuses them.)
		var serde sr.Serde
		for i, v := range consumeValues(t, a.kafka, topic, n) {
			if id, _, err := serde.DecodeID(v); err != nil || id != p.ID {
				t.Fatalf("record %d: schema id %d, %v; want %d", i, id, err, p.ID)
			}
		}
		// A topic validating schemas refuses them: the payload is read
		// as message indexes first and does not decode.
		refused := "reg-kafkajs-proto-validated"
		createValidatedTopic(t, a.kafka, refused)
		line, failure := runClientScript(t, append(append(node, "produce", "--topic", refused, "--format", "protobuf"), common...), nodeEnv)
		if failure == "" || !strings.Contains(failure, "validation") {
			t.Fatalf("kafkajs's Protobuf records to a validating topic: %s %s; want the broker's refusal (INVALID_RECORD)", line, failure)
		}
		// kafkajs decodes with the schema our registry returns by id.
		var c consumed
		clientScript(t, append(append(node, "consume", "--topic", topic), common...), nodeEnv, &c)
		if !slices.Equal(c.Records, wantOrders(n)) {
			t.Fatalf("kafkajs read %v, want %v", c.Records, wantOrders(n))
		}
	})
}

// produceValuesOf produces one record per value, encoded by enc, and
// waits for every acknowledgement.
func produceValuesOf[T any](t *testing.T, addr, topic string, vs []T, enc func(any) []byte) {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	rs := make([]*kgo.Record, len(vs))
	for i, v := range vs {
		rs[i] = &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: enc(v)}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// TestRegistryClusterPostgres: three agents on one PostgreSQL log, each
// serving the registry. A schema registered on one is served by the
// others; registrations on all three at once never give two schemas one
// id, nor one schema two ids, nor a subject two schemas at one version;
// an agent killed with SIGKILL mid-registration comes back serving
// everything registered meanwhile. It also measures what docs/performance.md
// quotes: a lookup by id (a read of the agent's local copy) and a
// registration (a round of the PostgreSQL log), at p50 and p99.
func TestRegistryClusterPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strand binary and starts PostgreSQL")
	}
	logURL := pgLogletURL(t, "e2e-registry")
	objURL := "file://" + t.TempDir()
	agents := make([]*registryAgent, 3)
	for i := range agents {
		agents[i] = startRegistryAgent(t, "--data-dir", t.TempDir(), "--node-id", strconv.Itoa(i+1),
			"--objstore", objURL, "--log", logURL, "--lease", clusterLease.String(), "--snapshot-interval", "0")
	}
	for _, a := range agents {
		waitBrokers(t, a.kafka, []int32{1, 2, 3})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	clients := make([]*sr.Client, len(agents))
	for i, a := range agents {
		clients[i] = registryClient(t, a.url())
	}

	// Registered on one, served by every other.
	first, err := clients[0].CreateSchema(ctx, "first-value", sr.Schema{Schema: orderAvro})
	if err != nil {
		t.Fatal(err)
	}
	for i, cl := range clients[1:] {
		s, err := cl.SchemaByID(ctx, first.ID)
		if err != nil || avro.MustParse(s.Schema).Fingerprint() != avro.MustParse(orderAvro).Fingerprint() {
			t.Fatalf("agent %d: SchemaByID(%d) = %+v, %v", i+2, first.ID, s, err)
		}
	}

	// Concurrent registrations on all three agents, agent 2 killed in
	// the middle of them. Each writer registers distinct schemas under
	// its own subjects, the same schema under a subject every writer
	// uses, and distinct schemas under one subject every writer races
	// on (at NONE, so none is refused as incompatible).
	for _, r := range clients[0].SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "race-value") {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	const perWriter = 40
	type registered struct {
		subject, schema string
		id, version     int
	}
	var (
		mu   sync.Mutex
		regs []registered
		lost int // registrations whose answer was lost with agent 2
	)
	var wg sync.WaitGroup
	// Agent 2 is killed while its writer is halfway, most likely with
	// a registration of its in flight.
	half, killed := make(chan struct{}), make(chan struct{})
	var halfOnce sync.Once
	halfway := func() { halfOnce.Do(func() { close(half) }) }
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-half
		time.Sleep(time.Millisecond)
		close(killed)
		agents[1].proc.kill()
	}()
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w == 1 {
				defer halfway() // a writer that failed early must not leave the killer waiting
			}
			for i := range perWriter {
				for _, r := range []registered{
					{subject: fmt.Sprintf("own-%d-%d-value", w, i), schema: fieldSchema(fmt.Sprintf("own_%d_%d", w, i))},
					{subject: "shared-value", schema: fieldSchema("shared")},
					{subject: "race-value", schema: fieldSchema(fmt.Sprintf("race_%d_%d", w, i))},
				} {
					s, err := clients[w].CreateSchema(ctx, r.subject, sr.Schema{Schema: r.schema})
					if err != nil {
						if w == 1 && isClosed(killed) {
							mu.Lock()
							lost++
							mu.Unlock()
							return
						}
						t.Errorf("writer %d: register %s: %v", w, r.subject, err)
						return
					}
					r.id, r.version = s.ID, s.Version
					mu.Lock()
					regs = append(regs, r)
					mu.Unlock()
				}
				if w == 1 && i == perWriter/2 {
					halfway()
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	agents[1].proc = startProcess(t, agents[1].http, agents[1].args...)

	idOf := map[string]int{}     // schema text -> id
	schemaOf := map[int]string{} // id -> schema text
	versionOf := map[[2]string]int{}
	atVersion := map[string]map[int]string{}
	for _, r := range regs {
		if id, ok := idOf[r.schema]; ok && id != r.id {
			t.Errorf("one schema, two ids: %d and %d (%s)", id, r.id, r.schema)
		}
		if s, ok := schemaOf[r.id]; ok && s != r.schema {
			t.Errorf("id %d given to two schemas: %s and %s", r.id, s, r.schema)
		}
		idOf[r.schema], schemaOf[r.id] = r.id, r.schema
		k := [2]string{r.subject, r.schema}
		if v, ok := versionOf[k]; ok && v != r.version {
			t.Errorf("%s: one schema at versions %d and %d", r.subject, v, r.version)
		}
		versionOf[k] = r.version
		if atVersion[r.subject] == nil {
			atVersion[r.subject] = map[int]string{}
		}
		if s, ok := atVersion[r.subject][r.version]; ok && s != r.schema {
			t.Errorf("%s version %d holds two schemas", r.subject, r.version)
		}
		atVersion[r.subject][r.version] = r.schema
	}
	t.Logf("%d registrations answered, %d ids, %d versions of race-value; %d answer lost with the killed agent",
		len(regs), len(schemaOf), len(atVersion["race-value"]), lost)

	// Every agent, the restarted one included, serves every id and the
	// racing subject's versions 1..n without a gap.
	for i, cl := range clients {
		for id, schema := range schemaOf {
			s, err := cl.SchemaByID(ctx, id)
			if err != nil || avro.MustParse(s.Schema).Fingerprint() != avro.MustParse(schema).Fingerprint() {
				t.Fatalf("agent %d: SchemaByID(%d) = %+v, %v; want %s", i+1, id, s, err, schema)
			}
		}
		vs, err := cl.SubjectVersions(ctx, "race-value")
		if err != nil || len(vs) < len(atVersion["race-value"]) || vs[0] != 1 || vs[len(vs)-1] != len(vs) {
			t.Fatalf("agent %d: race-value versions %v, %v; %d registrations answered", i+1, vs, err, len(atVersion["race-value"]))
		}
	}
	if s, err := clients[1].CreateSchema(ctx, "after-restart-value", sr.Schema{Schema: fieldSchema("after")}); err != nil || schemaOf[s.ID] != "" {
		t.Fatalf("register on the restarted agent = %+v, %v (ids taken: %d)", s, err, len(schemaOf))
	}

	measureRegistry(t, ctx, clients[0], first.ID)
}

// measureRegistry logs the latency of lookups by id and of
// registrations through one agent, the numbers docs/performance.md quotes.
func measureRegistry(t *testing.T, ctx context.Context, cl *sr.Client, id int) {
	const lookups, registrations = 2000, 200
	lookup := make([]time.Duration, lookups)
	for i := range lookup {
		start := time.Now()
		if _, err := cl.SchemaByID(ctx, id); err != nil {
			t.Fatal(err)
		}
		lookup[i] = time.Since(start)
	}
	register := make([]time.Duration, registrations)
	for i := range register {
		start := time.Now()
		if _, err := cl.CreateSchema(ctx, fmt.Sprintf("measure-%d-value", i), sr.Schema{Schema: fieldSchema(fmt.Sprintf("m_%d", i))}); err != nil {
			t.Fatal(err)
		}
		register[i] = time.Since(start)
	}
	t.Logf("lookup by id over HTTP: %s; registration on PostgreSQL: %s", quantiles(lookup), quantiles(register))
}

func quantiles(ds []time.Duration) string {
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return fmt.Sprintf("p50 %v p99 %v max %v (n=%d)", at(0.5).Round(10*time.Microsecond), at(0.99).Round(10*time.Microsecond), ds[len(ds)-1].Round(10*time.Microsecond), len(ds))
}

// fieldSchema is an Avro record schema told apart by its one field's name.
func fieldSchema(field string) string {
	return `{"type":"record","name":"R","fields":[{"name":"` + field + `","type":"long"}]}`
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
