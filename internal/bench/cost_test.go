package bench

import (
	"math"
	"testing"

	"github.com/strandkafka/strand/internal/cost"
)

// priceRun prices the agent's counters of the window: 3 GB and 360
// PUTs are 120 PUTs per GB at $0.005 per 1,000.
func TestPriceRun(t *testing.T) {
	o := &Options{Embedded: true, Cost: true, CostWorkload: cost.Workload{FanOut: 3, RetentionDays: 7, Zones: 3}}
	res := &PhaseResult{Produced: Throughput{Bytes: 3e9}, Agent: &AgentStats{Puts: 360, LogAppends: 300}}
	c, err := priceRun(o, res)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Strand.Terms[0]; got.Name != "object store PUTs" || math.Abs(got.Dollars-120*0.005/1000) > 1e-12 {
		t.Errorf("first term %+v, want the PUTs at $0.0006", got)
	}
	if c.Kafka.Total() <= c.KafkaFollowerFetching.Total() || c.Strand.Total() >= c.Kafka.Total() {
		t.Errorf("Strand $%.4f, Kafka $%.4f, with follower fetching $%.4f", c.Strand.Total(), c.Kafka.Total(), c.KafkaFollowerFetching.Total())
	}
	if _, err := priceRun(o, &PhaseResult{Produced: Throughput{Bytes: 3e9}}); err == nil {
		t.Error("a run without agent metrics was priced")
	}
}
