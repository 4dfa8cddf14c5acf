// Package txn owns Strand's transaction coordinator: InitProducerId for
// every producer, and for transactional ones adding partitions and
// groups to a transaction, committing offsets in it, ending it, the
// admin reads of transaction and producer state (DescribeTransactions,
// ListTransactions, DescribeProducers), which agent coordinates a
// transactional id (package placement), and the sweep that aborts
// transactions past their timeout and forgets expired ids.
//
// The coordinator keeps no state of its own. A transaction's state is in
// the replicated database (meta/txn*.go: the commands, their apply and
// the views), so any agent can serve any transactional id: each request
// is validated here as far as apply does not (topics that exist, the
// transaction an EndTxn means, state filters and patterns), then
// proposed as meta commands and answered from their results. Apply
// decides every outcome from the log alone, so two agents that both
// think they coordinate an id (while they disagree on who is live)
// cannot corrupt it: the later command finds the state the earlier one
// left. Placement only names the agent clients should ask and the one
// that sweeps an id.
//
// The methods take and return this package's types (InitRequest,
// EndRequest, DescribedTxn, ...), which hold what the coordinator needs
// and nothing of the wire: package kafka's handler files convert each
// API version's request and answer to and from them, including the
// codes older versions name differently (PRODUCER_FENCED is
// INVALID_PRODUCER_EPOCH before KIP-588's versions). Errors are Kafka
// error codes (kerr), as in package group.
//
// # Proposals that fail
//
// A proposal with no result is answered with a retriable code: an agent
// that is stopping, or whose copy halted (it exits), is
// COORDINATOR_NOT_AVAILABLE (the client looks the coordinator up
// again), an ambiguous or timed-out proposal
// REQUEST_TIMED_OUT. Retrying an ambiguous command is safe because each
// command checks the state it finds: a repeated EndTxn succeeds again, a
// repeated AddPartitionsToTxn adds nothing new.
//
// # Reads
//
// The requests that read coordinator state (a verify-only
// AddPartitionsToTxn, EndTxn, the admin reads) sync the local copy with
// the log first, so they see what every agent wrote before they arrived.
// They carry no timeout of their own; SyncTimeout bounds the wait.
package txn
