package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.yaml.in/yaml/v3"
)

// writeConfig writes a config file for one test and returns its path.
func writeConfigFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "strand.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// configPrint runs `strand config print args...` and returns its output.
func configPrint(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"config", "print"}, args...))
	err := root.Execute()
	return out.String(), err
}

// printed is config print's JSON, by key.
func printed(t *testing.T, args ...string) map[string]configEntry {
	t.Helper()
	out, err := configPrint(t, append(args, "--format", "json")...)
	if err != nil {
		t.Fatalf("config print: %v\n%s", err, out)
	}
	var entries []configEntry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("config print JSON: %v\n%s", err, out)
	}
	m := map[string]configEntry{}
	for _, e := range entries {
		m[e.Key] = e
	}
	return m
}

// defaultOf is serve's default of flag name.
func defaultOf(t *testing.T, name string) string {
	t.Helper()
	fl := newServeCmd().Flags().Lookup(name)
	if fl == nil {
		t.Fatalf("serve has no flag %s", name)
	}
	return fl.DefValue
}

// TestConfigPrecedence: a flag wins over STRAND_<FLAG_NAME>, which wins
// over the --config file, which wins over the default; each layer is
// seen winning, and config print names it.
func TestConfigPrecedence(t *testing.T) {
	file := writeConfigFile(t, `
# every layer sets some of these
flush-bytes: 2097152
default-partitions: 5
snapshot-keep: 3
listeners:
  - PLAINTEXT://127.0.0.1:9092
  - SASL_PLAINTEXT://127.0.0.1:9093
auto-create-topics: false
log-retention-ms: 1000
`)
	t.Setenv("STRAND_DEFAULT_PARTITIONS", "6")
	t.Setenv("STRAND_SNAPSHOT_KEEP", "4")
	got := printed(t, "--config", file, "--snapshot-keep", "7")
	for _, want := range []configEntry{
		{Key: "flush-interval", Value: defaultOf(t, "flush-interval"), Source: sourceDefault},
		{Key: "flush-bytes", Value: "2097152", Source: sourceFile},
		{Key: "auto-create-topics", Value: "false", Source: sourceFile},
		{Key: "log-retention-ms", Value: "1000", Source: sourceFile},
		{Key: "listeners", Value: "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093", Source: sourceFile},
		{Key: "default-partitions", Value: "6", Source: sourceEnv},
		{Key: "snapshot-keep", Value: "7", Source: sourceFlag},
		{Key: "config", Value: file, Source: sourceFlag},
	} {
		if g := got[want.Key]; g.Source != want.Source || g.Value != want.Value {
			t.Errorf("%s = %q from %s, want %q from %s", want.Key, g.Value, g.Source, want.Value, want.Source)
		}
	}
	// The config file's path may itself come from the environment.
	t.Setenv("STRAND_CONFIG", file)
	if g := printed(t)["log-retention-ms"]; g.Value != "1000" || g.Source != sourceFile {
		t.Errorf("STRAND_CONFIG: log-retention-ms = %q from %s", g.Value, g.Source)
	}
}

// TestConfigPrintFormats: text is a table with every flag, yaml the same
// entries as json; secrets in values are not printed.
func TestConfigPrintFormats(t *testing.T) {
	file := writeConfigFile(t, "log: postgres://strand:hunter2@db.example/strand?sslmode=disable&password=hunter3\n")
	text, err := configPrint(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^KEY\s+VALUE\s+SOURCE$`).MatchString(text) ||
		!regexp.MustCompile(`(?m)^log\s+postgres://strand:REDACTED@db\.example/strand\?\S+\s+file$`).MatchString(text) ||
		!regexp.MustCompile(`(?m)^data-dir\s+\./strand-data\s+default$`).MatchString(text) {
		t.Errorf("text output:\n%s", text)
	}
	if strings.Contains(text, "hunter") {
		t.Errorf("a password is printed:\n%s", text)
	}
	y, err := configPrint(t, "--config", file, "--format", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var entries []configEntry
	if err := yaml.Unmarshal([]byte(y), &entries); err != nil || len(entries) < 50 || strings.Contains(y, "hunter") {
		t.Errorf("yaml output (%v, %d entries):\n%s", err, len(entries), y)
	}
	if _, err := configPrint(t, "--format", "xml"); err == nil {
		t.Error("--format xml accepted")
	}
}

func TestRedactSecret(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"log", "postgres://u:pw@h/db", "postgres://u:REDACTED@h/db"},
		{"log", "postgres://u@h/db?password=pw", "postgres://u@h/db?password=REDACTED"},
		{"objstore", "s3://b/p?endpoint=http://h&secret_key=k", "s3://b/p?endpoint=http%3A%2F%2Fh&secret_key=REDACTED"},
		{"objstore", "file:///d", "file:///d"},
		{"sasl-bootstrap-password-file", "/run/pw", "/run/pw"},
		{"admin-token", "t0ken", "REDACTED"},
		{"data-dir", "./d", "./d"},
	} {
		if got := redactSecret(tt.name, tt.in); got != tt.want {
			t.Errorf("%s %q: %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}

// TestConfigFileRejects: serve refuses a config file with an unknown key
// or a bad value, naming the key and its line, before starting; a bad
// value is refused even where a flag overrides it.
func TestConfigFileRejects(t *testing.T) {
	for _, tt := range []struct {
		name, file string
		args       []string
		want       string
	}{
		{"unknown key", "flush-bytes: 1MiB\nflush-byte: 2MiB\n", nil, `:2: key "flush-byte": unknown key`},
		{"bad value", "data-dir: ./d\nflush-interval: soon\n", nil, `:2: key "flush-interval": invalid argument "soon"`},
		{"bad value under a flag", "default-partitions: many\n", []string{"--default-partitions", "2"}, `:1: key "default-partitions"`},
		{"config in config", "config: other.yaml\n", nil, `key "config": unknown key`},
		{"help", "help: true\n", nil, `key "help": unknown key`},
		{"nested", "listeners:\n  a: b\n", nil, `:1: key "listeners": want a value or a list`},
		{"null", "data-dir:\n", nil, `key "data-dir": no value`},
		{"twice", "snapshot-keep: 2\nsnapshot-keep: 3\n", nil, `:2: key "snapshot-keep": given twice`},
		{"not a mapping", "- data-dir\n", nil, "want a mapping"},
		{"not YAML", "data-dir: [\n", nil, "yaml"},
		{"valid but refused by serve", "flush-bytes: 1\n", nil, "flush-bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := writeConfigFile(t, tt.file)
			root := newRootCmd()
			root.SetArgs(append([]string{"serve", "--config", file, "--kafka-listen", "127.0.0.1:0", "--http-listen", "", "--schema-registry-listen", "", "--connect-listen", "", "--data-dir", t.TempDir()}, tt.args...))
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // a serve that wrongly starts stops at once, returning nil
			err := root.ExecuteContext(ctx)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestServeConfigFile runs serve from a config file alone: JSON logs
// (log-format from the file), the listener it names, and a broker
// logger raised to DEBUG through IncrementalAlterConfigs makes the
// group coordinator's debug lines appear without a restart.
func TestServeConfigFile(t *testing.T) {
	dir := t.TempDir()
	file := writeConfigFile(t, `
data-dir: `+filepath.Join(dir, "data")+`
kafka-listen: 127.0.0.1:0
http-listen: ""
schema-registry-listen: ""
connect-listen: ""
log-format: json
group-initial-rebalance-delay: 0s
message-max-bytes: 2000000
`)
	logs := startServe(t, `"msg":"strand agent serving"`, "serve", "--config", file)
	m := regexp.MustCompile(`"msg":"strand agent serving".*?"kafka":"([^"]+)"`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no Kafka address in JSON logs:\n%s", logs)
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("not a JSON line: %s", line)
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(m[1]), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"),
		kgo.AllowAutoTopicCreation(), kgo.RetryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	reqCtx, reqCancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer reqCancel()
	// A setting of the file reaches the agent: DescribeConfigs shows it
	// as set by the agent's configuration.
	bc, err := kadm.NewClient(cl).DescribeBrokerConfigs(reqCtx, 0)
	if err != nil || len(bc) != 1 || bc[0].Err != nil {
		t.Fatalf("describe broker 0: %v %+v", err, bc)
	}
	var mmb kadm.Config
	for _, c := range bc[0].Configs {
		if c.Key == "message.max.bytes" {
			mmb = c
		}
	}
	if mmb.MaybeValue() != "2000000" || mmb.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("message.max.bytes %q from %v, want 2000000 from the file (STATIC_BROKER_CONFIG)", mmb.MaybeValue(), mmb.Source)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "0"
	op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	op.Name, op.Value = "group", kmsg.StringPtr("DEBUG")
	rr.Configs = append(rr.Configs, op)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(reqCtx, cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("set logger group to DEBUG: %v %+v", err, resp)
	}
	if strings.Contains(logs.String(), `"level":"DEBUG"`) {
		t.Fatalf("DEBUG lines at the default level INFO:\n%s", logs)
	}
	joined := &notifyWriter{match: `"level":"DEBUG"`, matched: make(chan struct{})}
	logs.tee(joined)
	// Polling joins the group; the coordinator logs the join at DEBUG.
	go cl.PollFetches(reqCtx)
	select {
	case <-joined.matched:
	case <-reqCtx.Done():
		t.Fatalf("no DEBUG line after the logger change:\n%s", logs)
	}
	if !strings.Contains(joined.String(), `"component":"group"`) {
		t.Errorf("DEBUG line not the group's: %s", joined)
	}
}

// TestConfigPrintEffective: config print shows what serve runs with
// where that is not the flag's own value: the store and log under the
// data dir, compaction, hedging and the PUT budget that depend on the
// store, the listeners and advertised addresses from --kafka-listen,
// each as derived, with the flag's value beside it; what the operator
// gave stays as given.
func TestConfigPrintEffective(t *testing.T) {
	dir := t.TempDir()
	local := printed(t, "--data-dir", dir, "--kafka-listen", "127.0.0.1:9192")
	remote := printed(t, "--data-dir", dir, "--objstore", "s3://bucket/prefix?region=eu-west-1", "--advertise", "kafka.example:9092")
	for _, tt := range []struct {
		name    string
		entries map[string]configEntry
		key     string
		value   string
		source  string
	}{
		{"local store", local, "objstore", "file://" + filepath.ToSlash(filepath.Join(dir, "objects")), sourceDerived},
		{"local log", local, "log", "file://" + filepath.ToSlash(filepath.Join(dir, "log")), sourceDerived},
		{"listeners from kafka-listen", local, "listeners", "PLAINTEXT://127.0.0.1:9192", sourceDerived},
		{"advertised from the bound address", local, "advertised-listeners", "PLAINTEXT://127.0.0.1:9192", sourceDerived},
		{"kafka-listen as given", local, "kafka-listen", "127.0.0.1:9192", sourceFlag},
		{"no compaction on a local store", local, "compaction-enable", "false", sourceDefault},
		{"no hedging on a local store", local, "objstore-hedge-percentile", "0", sourceDefault},
		{"the embedded log's lease", local, "lease", "10s", sourceDerived},
		{"grace", local, "gc-grace", "10m0s", sourceDefault},
		{"delete delay", local, "gc-delete-delay", "1m0s", sourceDefault},
		{"retention check", local, "log-retention-check-interval-ms", "300000", sourceDefault},
		{"remote store as given", remote, "objstore", "s3://bucket/prefix?region=eu-west-1", sourceFlag},
		{"compaction on a remote store", remote, "compaction-enable", "true", sourceDerived},
		{"hedging on a remote store", remote, "objstore-hedge-percentile", "0.9", sourceDerived},
		{"PUT budget on a remote store", remote, "max-puts-per-sec", "4", sourceDerived},
		{"advertised from --advertise", remote, "advertised-listeners", "PLAINTEXT://kafka.example:9092", sourceDerived},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := tt.entries[tt.key]
			if !ok || e.Value != tt.value || e.Source != tt.source {
				t.Fatalf("%s: %+v, want %q from %s", tt.key, e, tt.value, tt.source)
			}
			if (tt.source == sourceDerived) != (e.Given != nil) {
				t.Errorf("%s: given %v, want the flag's value only beside a derived one", tt.key, e.Given)
			}
		})
	}
	if g := local["objstore"].Given; g == nil || *g != "" {
		t.Errorf("objstore given %v, want the flag's empty default", g)
	}
}

// TestConfigDidYouMean: an unknown flag of serve or config print, or an
// unknown key of the config file, names the closest setting; one far
// from every setting names none.
func TestConfigDidYouMean(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		file string
		want string
	}{
		{"config print flag", []string{"config", "print", "--kafka-lisen", ":1"}, "", "unknown flag: --kafka-lisen (did you mean --kafka-listen?)"},
		{"serve flag", []string{"serve", "--gc-grase", "5m"}, "", "unknown flag: --gc-grase (did you mean --gc-grace?)"},
		{"file key", []string{"config", "print"}, "log-retention-check-interval: 1000\n", `key "log-retention-check-interval": unknown key (the keys are the flags of strand serve) (did you mean log-retention-check-interval-ms?)`},
		{"serve file key", []string{"serve"}, "datadir: ./d\n", `key "datadir": unknown key (the keys are the flags of strand serve) (did you mean data-dir?)`},
		{"nothing close", []string{"config", "print", "--zzzzzzzz"}, "", "unknown flag: --zzzzzzzz"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append(args, "--config", writeConfigFile(t, tt.file))
			}
			root := newRootCmd()
			root.SetArgs(args)
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // a serve that wrongly starts stops at once
			err := root.ExecuteContext(ctx)
			if err == nil || !strings.HasSuffix(err.Error(), tt.want) {
				t.Fatalf("error %v, want one ending %q", err, tt.want)
			}
			if tt.name == "nothing close" && strings.Contains(err.Error(), "did you mean") {
				t.Errorf("suggested a setting for a name close to none: %v", err)
			}
		})
	}
}
