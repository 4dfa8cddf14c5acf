package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/clock"
)

// aheadClock reads the wall clock moved forward by d; its timers are the
// wall clock's.
type aheadClock struct{ d time.Duration }

func (c aheadClock) Now() time.Time { return time.Now().Add(c.d) }

func (c aheadClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return clock.Real.AfterFunc(d, f)
}

// TestAgentClock: the clock a test gives the agent reaches the pieces
// that keep time. The replica stamps entries with it, so registering in
// the agent table moves the log clock, all that apply reads, to the
// agent's time.
func TestAgentClock(t *testing.T) {
	const ahead = 24 * time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cfg := agent.Config{DataDir: t.TempDir(), KafkaListen: "127.0.0.1:0"}
	agent.SetClock(&cfg, aheadClock{ahead})
	before := time.Now()
	a, err := agent.Start(ctx, cfg, quietLogger())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { stop(t, a) })
	v := a.Replica().View()
	defer v.Close()
	now, err := v.LogClock()
	if err != nil {
		t.Fatal(err)
	}
	if want := before.Add(ahead).UnixMilli(); now < want {
		t.Fatalf("log clock %d after start, want at least %d: the agent's clock is %v ahead of the wall clock", now, want, ahead)
	}
}
