package e2e

import (
	"context"
	"crypto/x509/pkix"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/compat"
	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/certs"
	"github.com/strandkafka/strand/internal/certs/certstest"
)

// mtlsAgent is an agent with a PLAINTEXT listener (for the test's own
// checks) and an SSL listener that requires a client certificate from
// ca.
type mtlsAgent struct {
	*agent.Agent
	ca     *certstest.CA
	client certstest.Pair
	ssl    string
}

func startMTLSAgent(t *testing.T) mtlsAgent {
	t.Helper()
	ca := certstest.NewCA(t, "ca")
	server := ca.Server(t, "server")
	a := startAgent(t, agent.Config{
		Listeners:   "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		TLSCertFile: server.CertFile, TLSKeyFile: server.KeyFile,
		TLSClientCAFile: ca.CertFile, TLSClientAuth: "required",
	})
	return mtlsAgent{Agent: a, ca: ca, ssl: a.ListenerAddr("SSL"),
		client: ca.Client(t, "client", pkix.Name{CommonName: "client", OrganizationalUnit: []string{"e2e"}})}
}

// tlsVerdict is what each client script prints.
type tlsVerdict struct {
	Produced int    `json:"produced"`
	Consumed int    `json:"consumed"`
	Error    string `json:"error"`
}

// runVerdict runs a client script and decodes its verdict.
func runVerdict(t *testing.T, argv, env []string) tlsVerdict {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(cmd.Environ(), env...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var v tlsVerdict
	if jerr := json.Unmarshal(out, &v); jerr != nil {
		t.Fatalf("%s: %v; output not JSON (%v):\nstdout:\n%s\nstderr:\n%s", argv[0], err, jerr, out, stderr.String())
	}
	return v
}

// TestClientsOverMTLS: franz-go, kcat, kafka-python,
// confluent-kafka-python and kafkajs each produce and consume over an
// SSL listener with a client certificate; the records are checked
// through the PLAINTEXT listener. A client without a certificate, or
// with one from another CA, is refused.
func TestClientsOverMTLS(t *testing.T) {
	a := startMTLSAgent(t)
	const count = 100
	files := []string{"--bootstrap", a.ssl, "--ca", a.ca.CertFile, "--cert", a.client.CertFile, "--key", a.client.KeyFile,
		"--count", strconv.Itoa(count)}
	checkTopic := func(t *testing.T, topic string, v tlsVerdict) {
		t.Helper()
		if v.Error != "" {
			t.Fatalf("client failed: %s", v.Error)
		}
		if v.Produced != count || v.Consumed != count {
			t.Errorf("client produced %d and consumed %d, want %d each", v.Produced, v.Consumed, count)
		}
		if got := endOffsets(t, a.KafkaAddr(), topic)[0]; got != count {
			t.Errorf("end offset of %s %d, want %d", topic, got, count)
		}
	}

	t.Run("franz-go", func(t *testing.T) {
		const topic = "tls-kgo"
		createTopic(t, a.KafkaAddr(), topic, 1)
		cfg, err := certs.ClientConfig(certs.ClientFiles{CAFile: a.ca.CertFile, CertFile: a.client.CertFile, KeyFile: a.client.KeyFile})
		if err != nil {
			t.Fatal(err)
		}
		cl := newClient(t, a.ssl, kgo.DialTLSConfig(cfg), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		var rs []*kgo.Record
		for i := range count {
			rs = append(rs, &kgo.Record{Topic: topic, Value: []byte("v" + strconv.Itoa(i))})
		}
		v := tlsVerdict{}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			v.Error = err.Error()
		} else {
			v.Produced = count
		}
		for v.Error == "" && v.Consumed < count {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				v.Error = err.Error()
			}
			v.Consumed += fs.NumRecords()
		}
		checkTopic(t, topic, v)
	})

	t.Run("kcat", func(t *testing.T) {
		kcat := requireCommand(t, "kcat")
		const topic = "tls-kcat"
		createTopic(t, a.KafkaAddr(), topic, 1)
		ssl := []string{"-b", a.ssl, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + a.ca.CertFile,
			"-X", "ssl.certificate.location=" + a.client.CertFile, "-X", "ssl.key.location=" + a.client.KeyFile}
		var in strings.Builder
		for i := range count {
			in.WriteString("v" + strconv.Itoa(i) + "\n")
		}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		produce := exec.CommandContext(ctx, kcat, append(ssl, "-P", "-t", topic, "-X", "acks=all")...)
		produce.Stdin = strings.NewReader(in.String())
		v := tlsVerdict{}
		if out, err := produce.CombinedOutput(); err != nil {
			t.Fatalf("kcat -P over SSL: %v\n%s", err, out)
		}
		v.Produced = count
		out, err := exec.CommandContext(ctx, kcat, append(ssl, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", `%s\n`)...).Output()
		if err != nil {
			t.Fatalf("kcat -C over SSL: %v", err)
		}
		for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
			if strings.HasPrefix(line, "v") {
				v.Consumed++
			}
		}
		checkTopic(t, topic, v)

		// Without a certificate the handshake is refused.
		noCert := []string{"-b", a.ssl, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + a.ca.CertFile, "-L", "-m", "2"}
		if out, err := exec.CommandContext(ctx, kcat, noCert...).CombinedOutput(); err == nil {
			t.Errorf("kcat without a client certificate listed metadata:\n%s", out)
		}
	})

	t.Run("kafka-python", func(t *testing.T) {
		requirePythonModule(t, "kafka", "python3-kafka")
		const topic = "tls-kafka-python"
		createTopic(t, a.KafkaAddr(), topic, 1)
		checkTopic(t, topic, runVerdict(t, append([]string{systemPython, "../compat/clients/tls_kafka_python.py", "--topic", topic}, files...), nil))

		// A certificate from another CA is refused.
		other := certstest.NewCA(t, "other")
		mallory := other.Client(t, "mallory", pkix.Name{CommonName: "client", OrganizationalUnit: []string{"e2e"}})
		bad := []string{systemPython, "../compat/clients/tls_kafka_python.py", "--topic", "tls-refused", "--bootstrap", a.ssl,
			"--ca", a.ca.CertFile, "--cert", mallory.CertFile, "--key", mallory.KeyFile, "--count", "1"}
		if v := runVerdict(t, bad, nil); v.Error == "" || v.Produced != 0 {
			t.Errorf("kafka-python with an untrusted certificate: %+v, want refused", v)
		}
	})

	t.Run("confluent-kafka-python", func(t *testing.T) {
		requirePythonModule(t, "confluent_kafka", "python3-confluent-kafka")
		const topic = "tls-confluent"
		createTopic(t, a.KafkaAddr(), topic, 1)
		checkTopic(t, topic, runVerdict(t, append([]string{systemPython, "../compat/clients/tls_confluent_kafka.py", "--topic", topic}, files...), nil))
	})

	t.Run("kafkajs", func(t *testing.T) {
		node := requireCommand(t, "node")
		var modules string
		requireTool(t, "kafkajs", func() error {
			dir, err := compat.KafkaJSDir()
			modules = dir + "/node_modules"
			if err == nil {
				_, err = exec.Command(node, "-e", "require('kafkajs')").CombinedOutput()
				if err != nil {
					cmd := exec.Command(node, "-e", "require('kafkajs')")
					cmd.Env = append(cmd.Environ(), "NODE_PATH="+modules)
					_, err = cmd.CombinedOutput()
				}
			}
			return err
		})
		const topic = "tls-kafkajs"
		createTopic(t, a.KafkaAddr(), topic, 1)
		checkTopic(t, topic, runVerdict(t, append([]string{node, "../compat/clients/tls_kafkajs.js", "--topic", topic}, files...), []string{"NODE_PATH=" + modules}))
	})
}
