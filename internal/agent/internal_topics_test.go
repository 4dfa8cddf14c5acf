package agent_test

import (
	"testing"

	"github.com/strandkafka/strand/internal/kafka"
)

// TestInternalTopicsCreated: a new cluster gets __consumer_offsets, and a
// restart on the same data dir does not create it again.
func TestInternalTopicsCreated(t *testing.T) {
	dir := t.TempDir()
	for i := range 2 {
		a := start(t, dir)
		v := a.Replica().View()
		tp, ok, err := v.Topic(kafka.ConsumerOffsetsTopic)
		v.Close()
		if err != nil || !ok || tp.Partitions != kafka.ConsumerOffsetsPartitions || tp.Configs["cleanup.policy"] != "compact" {
			t.Fatalf("start %d: %s = %+v (%v, %v)", i, kafka.ConsumerOffsetsTopic, tp, ok, err)
		}
		stop(t, a)
	}
}
