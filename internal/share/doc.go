// Package share serves the share-partition half of Kafka's share groups
// (KIP-932 as Kafka 4.2 serves it): ShareFetch and ShareAcknowledge.
//
// It owns the share sessions of this agent (in memory, keyed by group
// and member, with Kafka's epochs) and the path from a request to the
// replicated metadata: piggybacked acknowledgements first, then per
// partition the candidates (available in-flight offsets, then records
// past the share-partition end offset up to the high watermark or last
// stable offset, read through the fetch reader to learn batch
// boundaries), one ShareAcquire per partition batched into one log
// entry, and the record batches holding what apply granted.
//
// It owns no share-partition state: that lives in the replicated
// metadata (meta/share_state.go), where apply decides every acquisition
// and acknowledgement, so two agents serving consumers of one share
// partition never hand one record to two members, and an agent that
// dies takes nothing with it but its sessions. Membership and the
// assignor (ShareGroupHeartbeat) and the group configs are not here:
// Configs is how the agent plugs them in.
package share
