package e2e

import (
	"context"
	"os/exec"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// TestAutoCreateClients: the Metadata request that auto-creates a topic
// answers LEADER_NOT_AVAILABLE with no partitions, as Kafka's does, and
// the clients here ask again and produce: franz-go, kcat (librdkafka)
// and kafka-python, each to a topic only its produce names; franz-go
// also to a topic just deleted, which the next ask creates anew.
func TestAutoCreateClients(t *testing.T) {
	a := startAgent(t, agent.Config{AutoCreateTopics: true, DefaultPartitions: 3})
	addr := a.KafkaAddr()
	total := func(topic string) int64 {
		var n int64
		for _, off := range endOffsets(t, addr, topic) {
			n += off
		}
		return n
	}

	kgoProduce := func(t *testing.T, topic string) {
		cl := newClient(t, addr, kgo.AllowAutoTopicCreation())
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("kgo produce to %s: %v", topic, err)
		}
	}
	t.Run("franz-go", func(t *testing.T) {
		kgoProduce(t, "auto-kgo")
		if n := total("auto-kgo"); n != 1 {
			t.Fatalf("auto-kgo holds %d records, want 1", n)
		}
		adm := kadm.NewClient(newClient(t, addr))
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if resp, err := adm.DeleteTopic(ctx, "auto-kgo"); err != nil || resp.Err != nil {
			t.Fatalf("delete auto-kgo: %v, %v", err, resp.Err)
		}
		kgoProduce(t, "auto-kgo")
		if n := total("auto-kgo"); n != 1 {
			t.Fatalf("auto-kgo made again holds %d records, want 1", n)
		}
	})
	t.Run("kcat", func(t *testing.T) {
		k := kcatRunner{t: t, path: requireCommand(t, "kcat"), addr: addr}
		k.run(t, []byte("a\nb\n"), "-P", "-t", "auto-kcat")
		if n := total("auto-kcat"); n != 2 {
			t.Fatalf("auto-kcat holds %d records, want 2", n)
		}
	})
	t.Run("kafka-python", func(t *testing.T) {
		requirePythonModule(t, "kafka", "python3-kafka")
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		script := `import sys
from kafka import KafkaProducer
p = KafkaProducer(bootstrap_servers=sys.argv[1], acks="all")
p.send("auto-kpy", b"v").get(timeout=20)
p.close()
`
		out, err := exec.CommandContext(ctx, systemPython, "-c", script, addr).CombinedOutput()
		if err != nil {
			t.Fatalf("kafka-python produce: %v\n%s", err, out)
		}
		if n := total("auto-kpy"); n != 1 {
			t.Fatalf("auto-kpy holds %d records, want 1", n)
		}
	})
}
