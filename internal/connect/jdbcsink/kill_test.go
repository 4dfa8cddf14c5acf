package jdbcsink

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/connect"
)

// envChild carries a sink for TestSinkProcess to run: JSON of
// childSpec.
const envChild = "STRAND_JDBCSINK_TEST_CHILD"

type childSpec struct {
	Name    string            `json:"name"`
	Config  map[string]string `json:"config"`
	Brokers []string          `json:"brokers"`
}

// TestSinkProcess is not a test: it is the process TestKill9 starts and
// kills, running one sink task until killed.
func TestSinkProcess(t *testing.T) {
	raw := os.Getenv(envChild)
	if raw == "" {
		t.Skip("a helper process for TestKill9")
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	task, err := Class(nil).New(spec.Config)
	if err != nil {
		t.Fatal(err)
	}
	env := connect.Env{Name: spec.Name, Clock: clock.Real, Dir: t.TempDir(),
		Kafka:  func() []kgo.Opt { return []kgo.Opt{kgo.SeedBrokers(spec.Brokers...)} },
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	for {
		// As the runner would: start again after a failure.
		err := task.Run(context.Background(), env)
		t.Logf("task ended: %v", err)
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKill9: the process running the sink is killed with SIGKILL at
// random points, over and over, while records stream in (as the agent
// killed with -9 would be): every record's row is in the table once.
func TestKill9(t *testing.T) {
	targets(t, func(t *testing.T, d *db) {
		rng := testRand(t)
		topic := uniq("kill")
		kafka := cluster(t, 3, topic)
		brokers := seedsOf(t, kafka)
		p := newProducer(t, kafka)
		done := produceRows(t, p, topic, 100*time.Millisecond)
		name := uniq("kill")
		spec, _ := json.Marshal(childSpec{Name: name, Config: eoConfig(d, topic), Brokers: brokers})
		run := func() *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^TestSinkProcess$", "-test.v")
			cmd.Env = append(os.Environ(), envChild+"="+string(spec))
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			return cmd
		}
		progress := map[int64]bool{} // distinct totals seen after a kill
		for round := 0; ; round++ {
			cmd := run()
			time.Sleep(time.Duration(200+rng.IntN(600)) * time.Millisecond)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			got, _ := offsetsOf(d, name)
			var total int64
			for _, off := range got {
				total += off
			}
			progress[total] = true
			select {
			case <-done:
			default:
				continue
			}
			if round >= 10 {
				break
			}
		}
		// The kills must have landed while the sink was writing: else
		// the test proves nothing.
		if len(progress) < 3 {
			t.Fatalf("the killed processes committed at only %d distinct points", len(progress))
		}
		t.Logf("%d distinct committed points between kills", len(progress))
		cmd := run()
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		deadline := time.Now().Add(60 * time.Second)
		for {
			got, err := offsetsOf(d, name)
			caught := err == nil
			p.mu.Lock()
			for k, end := range p.ends {
				caught = caught && got[k] == end
			}
			p.mu.Unlock()
			if caught {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("not caught up in 60s: %v (%v)", got, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		checkOnce(t, d, topic)
	})
}

// seedsOf reads the broker addresses back out of the cluster's options.
func seedsOf(t *testing.T, kafka func() []kgo.Opt) []string {
	t.Helper()
	cl, err := kgo.NewClient(kafka()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seeds := cl.OptValue(kgo.SeedBrokers).([]string)
	if len(seeds) == 0 || !strings.Contains(seeds[0], ":") {
		t.Fatalf("seed brokers %v", seeds)
	}
	return seeds
}
