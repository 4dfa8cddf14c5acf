package kafka

import "github.com/strandkafka/strand/internal/meta"

// Kafka's internal topics. Strand keeps offsets and transaction state in
// its metadata database, not in topics, but clients and tools expect
// __consumer_offsets to exist (Metadata lists it as internal, a KIP-848
// regex subscription may match it), so the agent creates it, empty. No
// client may write to or delete an internal topic, as in Kafka.
const (
	ConsumerOffsetsTopic = "__consumer_offsets"
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
