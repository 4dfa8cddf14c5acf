package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandkafka/strand/compat"
	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/certs"
	"github.com/strandkafka/strand/internal/certs/certstest"
)

// saslCase is one listener and mechanism the client matrix runs.
type saslCase struct{ protocol, mechanism string }

var saslCases = []saslCase{
	{"SASL_PLAINTEXT", "PLAIN"},
	{"SASL_PLAINTEXT", "SCRAM-SHA-512"},
	{"SASL_SSL", "SCRAM-SHA-512"},
}

// saslRun is what one client run reports.
type saslRun struct {
	Sent     int    `json:"sent"`
	Received int    `json:"received"`
	Error    string `json:"error"`
}

// saslEnv is the agent and secrets every client of the matrix uses.
type saslEnv struct {
	a        *agent.Agent
	caFile   string
	password string
}

func (e *saslEnv) addr(protocol string) string { return e.a.ListenerAddr(protocol) }

// TestSASLClients: kcat (librdkafka), kafka-python 2.0 (SaslHandshake
// v0, unframed tokens), confluent-kafka-python, kafkajs and franz-go
// each produce and consume over SASL_PLAINTEXT with PLAIN and
// SCRAM-SHA-512 and over SASL_SSL with SCRAM-SHA-512, as the agent's
// bootstrap user; with a wrong password each gets an error and writes
// nothing. What the clients report is checked against the agent's end
// offsets.
func TestSASLClients(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	server := ca.Server(t, "server")
	env := &saslEnv{caFile: ca.CertFile, password: "matrix-pw-93"}
	env.a = startAgent(t, agent.Config{
		Listeners:             "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		TLSCertFile:           server.CertFile,
		TLSKeyFile:            server.KeyFile,
		SASLBootstrapUser:     "admin",
		SASLBootstrapPassword: env.password,
	})
	plainAddr := env.a.ListenerAddr("PLAINTEXT")
	createTopic(t, plainAddr, "denied", 1)

	clients := []struct {
		name string
		run  func(t *testing.T, env *saslEnv, c saslCase, topic, password string, count int) saslRun
	}{
		{"franz-go", runKgoSASL},
		{"kcat", runKcatSASL},
		{"kafka-python", runScriptSASL("kafka-python")},
		{"confluent-kafka-python", runScriptSASL("confluent-kafka-python")},
		{"kafkajs", runKafkaJSSASL},
	}
	const count = 50
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			for _, c := range saslCases {
				t.Run(c.protocol+"/"+c.mechanism, func(t *testing.T) {
					topic := strings.ToLower(strings.NewReplacer("_", "-", "/", "-").Replace(cl.name + "-" + c.protocol + "-" + c.mechanism))
					createTopic(t, plainAddr, topic, 1)
					r := cl.run(t, env, c, topic, env.password, count)
					if r.Error != "" || r.Sent != count || r.Received != count {
						t.Fatalf("%+v, want %d sent and received", r, count)
					}
					if n := endOffset(t, plainAddr, topic); n != count {
						t.Fatalf("the client reported %d records, the agent holds %d", count, n)
					}
				})
			}
			t.Run("wrong password", func(t *testing.T) {
				r := cl.run(t, env, saslCase{"SASL_SSL", "SCRAM-SHA-512"}, "denied", "not-"+env.password, 1)
				t.Logf("%s with a wrong password: %s", cl.name, r.Error)
				if r.Error == "" || r.Sent != 0 {
					t.Fatalf("%+v: want an error and nothing sent", r)
				}
				if n := endOffset(t, plainAddr, "denied"); n != 0 {
					t.Fatalf("%d records reached the topic with a wrong password", n)
				}
			})
		})
	}
}

func endOffset(t *testing.T, addr, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	ends, err := kadm.NewClient(newClient(t, addr)).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := ends.Lookup(topic, 0)
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	return o.Offset
}

func runKgoSASL(t *testing.T, env *saslEnv, c saslCase, topic, password string, count int) saslRun {
	var m sasl.Mechanism = scram.Auth{User: "admin", Pass: password}.AsSha512Mechanism()
	if c.mechanism == "PLAIN" {
		m = plain.Auth{User: "admin", Pass: password}.AsMechanism()
	}
	opts := []kgo.Opt{kgo.SASL(m), kgo.RequestRetries(0), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}})}
	if c.protocol == "SASL_SSL" {
		tlsCfg, err := certs.ClientConfig(certs.ClientFiles{CAFile: env.caFile})
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	cl := newClient(t, env.addr(c.protocol), opts...)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	// kgo retries a produce through authentication failures until its
	// context ends; a Metadata request reports the first one. It names
	// the topic: the first Metadata listing every topic on a new agent
	// reserves the whole response budget and, pipelined with the
	// consumer's own Metadata, waits for it until the client times out.
	if _, err := kadm.NewClient(cl).ListTopics(ctx, topic); err != nil {
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("Metadata failed with %v, not SASL_AUTHENTICATION_FAILED", err)
		}
		return saslRun{Error: err.Error()}
	}
	var rs []*kgo.Record
	for i := range count {
		rs = append(rs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v-%06d", i)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return saslRun{Error: err.Error()}
	}
	run := saslRun{Sent: count}
	for run.Received < count {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			run.Error = err.Error()
			return run
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != fmt.Sprintf("v-%06d", run.Received) {
				run.Error = fmt.Sprintf("record %d is %q", run.Received, r.Value)
			}
			run.Received++
		})
	}
	return run
}

// kcatSASL is kcat's -X settings for c.
func kcatSASL(env *saslEnv, c saslCase, password string) []string {
	args := []string{"-b", env.addr(c.protocol), "-X", "security.protocol=" + c.protocol, "-X", "sasl.mechanisms=" + c.mechanism,
		"-X", "sasl.username=admin", "-X", "sasl.password=" + password}
	if c.protocol == "SASL_SSL" {
		args = append(args, "-X", "ssl.ca.location="+env.caFile)
	}
	return args
}

func runKcatSASL(t *testing.T, env *saslEnv, c saslCase, topic, password string, count int) saslRun {
	kcat := requireCommand(t, "kcat")
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var in bytes.Buffer
	for i := range count {
		fmt.Fprintf(&in, "v-%06d\n", i)
	}
	p := exec.CommandContext(ctx, kcat, append(kcatSASL(env, c, password), "-P", "-t", topic, "-p", "0",
		"-X", "message.timeout.ms=5000", "-X", "request.required.acks=-1")...)
	p.Stdin = &in
	if out, err := p.CombinedOutput(); err != nil || len(out) > 0 {
		// kcat prints delivery failures and exits non-zero.
		return saslRun{Error: fmt.Sprintf("produce: %v: %s", err, out)}
	}
	cons := exec.CommandContext(ctx, kcat, append(kcatSASL(env, c, password), "-C", "-t", topic, "-p", "0",
		"-o", "beginning", "-e", "-c", strconv.Itoa(count), "-f", "%s\n")...)
	out, err := cons.Output()
	if err != nil {
		return saslRun{Sent: count, Error: fmt.Sprintf("consume: %v", err)}
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	run := saslRun{Sent: count, Received: len(lines)}
	for i, l := range lines {
		if l != fmt.Sprintf("v-%06d", i) {
			run.Error = fmt.Sprintf("line %d is %q", i, l)
			break
		}
	}
	return run
}

func runScriptSASL(client string) func(*testing.T, *saslEnv, saslCase, string, string, int) saslRun {
	return func(t *testing.T, env *saslEnv, c saslCase, topic, password string, count int) saslRun {
		if client == "kafka-python" {
			requirePythonModule(t, "kafka", "python3-kafka")
		} else {
			requirePythonModule(t, "confluent_kafka", "python3-confluent-kafka")
		}
		args := []string{"testdata/sasl_roundtrip.py", "--client", client}
		return runSASLScript(t, systemPython, nil, args, env, c, topic, password, count)
	}
}

func runKafkaJSSASL(t *testing.T, env *saslEnv, c saslCase, topic, password string, count int) saslRun {
	node := requireCommand(t, "node")
	dir, err := compat.KafkaJSDir()
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "kafkajs", "package.json"))
	}
	requireTool(t, "kafkajs", func() error { return err })
	return runSASLScript(t, node, []string{"NODE_PATH=" + filepath.Join(dir, "node_modules")},
		[]string{"testdata/sasl_roundtrip.js"}, env, c, topic, password, count)
}

// runSASLScript runs a client script with the case's settings and the
// password in $SASL_PASSWORD, and decodes the one JSON line it prints.
func runSASLScript(t *testing.T, interp string, extraEnv, args []string, env *saslEnv, c saslCase, topic, password string, count int) saslRun {
	t.Helper()
	args = append(args, "--bootstrap", env.addr(c.protocol), "--protocol", c.protocol, "--mechanism", c.mechanism,
		"--user", "admin", "--topic", topic, "--count", strconv.Itoa(count))
	if c.protocol == "SASL_SSL" {
		args = append(args, "--cafile", env.caFile)
	}
	if password != env.password {
		args = append(args, "--expect-auth-failure")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, interp, args...)
	cmd.Env = append(append(os.Environ(), "SASL_PASSWORD="+password), extraEnv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var r saslRun
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		t.Fatalf("%s: %v; output not JSON (%v):\n%s\nstderr:\n%s", args[0], err, jerr, out, stderr.String())
	}
	return r
}
