package kafka

import (
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/offsetstopic"
)

// Kafka's internal topics. Strand keeps offsets and transaction state in
// its metadata database, but clients and tools expect __consumer_offsets
// to exist (Metadata lists it as internal, a KIP-848 regex subscription
// may match it, Burrow reads committed offsets from it), so the agent
// creates it and writes every committed offset and group state to it
// as a derived view (package offsetstopic). No client may write to or
// delete an internal topic, as in Kafka; consumers may read it.
const (
	ConsumerOffsetsTopic = offsetstopic.Topic
	// ConsumerOffsetsPartitions is Kafka's offsets.topic.num.partitions
	// default.
	ConsumerOffsetsPartitions = 50
	transactionStateTopic     = "__transaction_state"
)

// isInternalTopic reports whether name is one of Kafka's internal topics.
func isInternalTopic(name string) bool {
	return name == ConsumerOffsetsTopic || name == transactionStateTopic
}

// ConsumerOffsetsCommand creates __consumer_offsets as Kafka would:
// compacted, ConsumerOffsetsPartitions partitions.
func ConsumerOffsetsCommand() meta.CreateTopic {
	return meta.CreateTopic{
		Name:       ConsumerOffsetsTopic,
		Partitions: ConsumerOffsetsPartitions,
		Configs:    map[string]string{"cleanup.policy": "compact"},
	}
}
