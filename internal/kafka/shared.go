package kafka

// sharedState is what the handlers of one Server share across
// connections. New makes it from the Config.
type sharedState struct {
	// partitionLists shares Metadata's partition entries.
	partitionLists *partitionLists
}

// maxSharedPartitionEntries bounds the Metadata partition entries kept
// (about 110 bytes each): four times the largest topic, so a cluster of a
// few large topics is answered from the table.
const maxSharedPartitionEntries = 4 * maxPartitionsPerTopic

func newSharedState(cfg Config) *sharedState {
	return &sharedState{partitionLists: newPartitionLists(maxSharedPartitionEntries)}
}
