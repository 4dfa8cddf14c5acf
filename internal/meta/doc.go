// Package meta is Strand's metadata state machine: the commands that
// change metadata, their log encoding, the key layout of the replicated
// database, the deterministic apply of commands to it, and the read
// views (View) the rest of the code answers from.
//
// It is pure by construction: it works against a narrow key-value
// interface (kv.go: Get, ordered iteration with bounds, Set, Delete,
// DeleteRange) and reaches no file, socket, clock, log or object store;
// TestPure fails if it ever imports what would let it. The driver
// lives in package replica: it proposes commands through the shared log,
// plays the log into Pebble through an Applier, serves Sync and Views,
// and takes snapshots. MemStore is the interface's in-memory reference,
// on which this package's tests and scenarios (testdata/) run.
//
// Every agent holds a full copy. No copy is ever written directly: a change
// is appended to the shared log as a command, and every copy applies the
// log in order, so copies that applied the same prefix hold the same bytes
// (View.Digest compares them).
//
// # Log entries
//
// A log entry is a group of commands from one writer, cut by the writer's
// appender (group commit) and applied together at one log position:
//
//	+---------+-----------+-------------+-----+-----------+-------+----------+----------+
//	| format  | writer id | incarnation | seq | timestamp | count | commands | checksum |
//	| 1 byte  | uvarint   | uvarint     | uv  | varint    | uv    | count x  | 4 bytes  |
//	| = 1     | len+bytes |             |     | unix ms   |       | command  | CRC-32C  |
//	+---------+-----------+-------------+-----+-----------+-------+----------+----------+
//
//	command: | type uvarint (u16) | version uvarint (u16) | payload uvarint len + bytes |
//
// The checksum (little-endian) covers every byte before it. Integers are
// varints (signed ones zigzag), and the encoding is canonical: the decoder
// rejects overlong varints, maps whose keys are not strictly increasing,
// and trailing bytes. Payload layouts are the appendPayload methods.
//
// (writer id, incarnation, seq) makes appends idempotent: a writer retries
// an ambiguous append with identical bytes, and apply drops an entry whose
// incarnation is below the writer's newest, or equal with a seq not above
// the last applied. The timestamp is the proposer's clock; apply's only
// notion of time is the log clock: the max timestamp applied below
// metadata level 5, voted among the live agents from level 5
// (logclock.go), so that no one agent's clock moves it far.
//
// A copy that meets an entry it cannot decode, or a command type or
// version it does not know, halts before it (Apply's *PoisonError) instead
// of guessing: every copy of that build stops at the same position, and a
// newer build moves on.
//
// # Commands
//
// Dispatch is one table (table.go), indexed by command type: per type its
// name, a decoder per version this build reads, its apply, and how its
// apply reaches partition state (none, through the Applier's cache, or
// directly, which writes back and drops the cache first). A command's own
// file holds its type, encoder, decoders and apply; adding one is that
// file and a row. TestCommandTable checks every row has a fuzz seed, a
// round trip at every version and a scenario applying it.
//
// # Feature levels
//
// A command version a build cannot decode halts it, so a build writes a
// version only once every agent reads it: the finalized
// strand.metadata.version in the log says which versions agents write
// (features.go). Each table row says from which level this build writes
// each version, and EncodeCommandAt picks the highest the level allows.
// A log with no finalized level is at level 1, what builds before levels
// wrote; a new cluster's first agent finalizes its build's highest
// level (FinalizeFeatures with Bootstrap). Raising a level
// (FinalizeFeatures, type 20) is refused while a live agent does not
// support it, and a copy of a build that does not support a finalized
// level halts before it. Kafka's transaction.version and group.version
// are finalized the same way, from level 2.
//
// # Key layout
//
// Keys start with a one-byte prefix. Integers in keys are big-endian so
// byte order is numeric order; values start with a record version byte
// (1) followed by varints.
//
//	prefix  key                                        value
//	0x01    topic name                                 Topic: id, name, partitions, created-at, configs (sorted)
//	0x02    topic id (16)                              topic name
//	0x03    topic id (16), partition (u32)             PartitionState: next offset (= high watermark), log start offset
//	0x04    topic id (16), partition (u32), base (u64) IndexEntry: object key, position, length, records, batch count,
//	                                                   first and max timestamp, producer id, epoch, base sequence
//	0x05    object key                                 object record: size, committed-at, batch count
//	0x06    writer id                                  writer dedupe state: incarnation, last seq
//	0x07    -                                          log clock (u64, unix ms)
//	0x08    -                                          applied position: next log position to apply (u64)
//	0x09    group id                                   Group: kind, protocol type, protocol, generation, leader,
//	                                                   state timestamp, subscribed topics, members (id, instance id,
//	                                                   client id and host, timeouts, metadata, assignment)
//	0x0A    group id length (u16), group id,           CommittedOffset: offset, leader epoch, metadata,
//	        topic id (16), partition (u32)             commit timestamp, expire timestamp (-1: none)
//	0x0B    topic id (16), group id                    marker: the group has offsets of the topic
//	0x0C    node id (u32)                              AgentInfo: agent id, host, port, rack, lease, registered-at, expires,
//	                                                   and (record version 2, when known) its applied position,
//	                                                   and (record version 3, when known) its supported feature ranges
//	                                                   and (record version 4, when known) its advertised listeners
//	0x0D    -                                          cluster id (fixed by the first AgentHeartbeat)
//	0x10    -                                          next producer id (AllocateProducerID)
//	0x11    topic id (16), partition (u32),            producer state: epoch, last write (log clock), latest batches
//	        producer id (u64)                          (at most 5: first seq, last seq, base offset), oldest first
//	0x12    transactional id                           TxnState: producer id, epoch, previous epoch and why bumped,
//	                                                   timeout, status, seq, start, updated, partitions, groups
//	0x13    topic id (16), partition (u32),            open transaction in the partition: epoch, first offset (-1: none yet)
//	        producer id (u64)
//	0x14    topic id (16), partition (u32),            aborted transaction: producer id, first offset
//	        abort marker offset (u64)
//	0x15    group id length (u16), group id,           offset committed in an ongoing transaction: producer id,
//	        topic id (16), partition (u32),            offset, leader epoch, metadata, commit timestamp
//	        producer id (u64)
//	0x16    -                                          finalized features: epoch, (name, level) sorted by name
//	0x17    topic id (16), partition (u32)             PartitionStorage (level 3): bytes and data index entries
//	                                                   stored; none while nothing is
//	0x19    object key                                 index entries pointing into the object, while any do (level 3)
//	0x1A    log clock at death (u64), object key       dead object waiting for the janitor: size (level 3), position after its death (level 5)
//	0x1B    -                                          GCState: grace, floor, sweep mark, live/dead/deleted/orphan counts
//	0x1D    topic id (16), partition (u32)             replica list (ReassignPartitions), preferred leader first
//	0x1E    topic id (16)                              log position after the topic's last ReassignPartitions
//	0x1F    resource ("" or node id)                   dynamic broker configs (AlterBrokerConfigs), sorted by name
//	0x20    -                                          clock voices (level 5, logclock.go): per live agent, sorted by id:
//	                                                   newest entry's timestamp and position, quiet time, lease, expiry
//	0x23    0x00                                       ACL counter: generation (changes so far), count (level 4)
//	0x23    0x01, resource type, pattern type, name,   marker: the ACL binding is held (CreateACLs, DeleteACLs)
//	        principal, host, operation, permission
//	0x26    -                                          client quota version, raised by every quota change
//	0x26    user part, client id part (kind, name)     client quotas (AlterClientQuota), sorted by key
//	0x22    user, 0, mechanism (1 byte)                SCRAM credential (level 4): iterations, salt, stored key, server key
//	0x27    schema id (4 bytes)                        StoredSchema: type, text, references (level 6, schemas.go)
//	0x28    SHA-256 of type, text, references          schema id: one id per schema
//	0x29    subject, 0x00, version (4 bytes)           SchemaVersion: schema id, soft-deleted
//	0x2A    0x00 (global) or 0x01, subject             SchemaConfigRecord: compatibility level, mode
//	0x2B    -                                          the next schema id to assign
//	0x2C    relation name                              relation id (u64) (level 7, sql.go)
//	0x2D    relation id (u64)                          Relation: kind, name, SQL text, columns (name, type OID, typmod),
//	                                                   options, topic, format, query, dependencies (ids), owner
//	0x2E    relation id read (u64), reader id (u64)    marker: the reader depends on the relation
//	0x2F    -                                          relation counter: next id, count
//	0x30    connector name                             Connector (level 8, connect.go): config (secrets as references),
//	                                                   owner, target state, generation, task status (generation,
//	                                                   state, node, worker, trace)
//	0x31    -                                          connector count
//	0x38    group (length-prefixed), topic id,         ShareState (level 9, share_state.go): SPSO, SPEO, state epoch,
//	        partition (4 bytes)                        the in-flight window as runs (length, state, delivery count,
//	                                                   holder, lock deadline by the log clock)
//	0x40    group id                                   group configs (level 9, share_group.go: AlterGroupConfigs),
//	                                                   sorted by name; a share group is a 0x09 record of kind share
//	0xFF    local keys ('i' + writer id)               last incarnation this copy used; not replicated, not in the digest
//
// A topic's partitions and index are contiguous ranges, so deleting a
// topic is two range deletions, and a fetch walks one range in offset
// order. A group's offsets are one range too (the length prefix keeps one
// group id from running into another); the 0x0B markers let deleting a
// topic drop its committed offsets group by group, without scanning every
// group. A group record exists exactly while the group has stored state
// or offsets: the first offset commit creates it, DeleteGroup and offset
// expiry of an empty group remove it.
//
// # Apply
//
// Apply is a pure function of (state, entry, position): it reads no clock,
// draws no random numbers, does no I/O but its Batch, and never lets map
// iteration order reach the store. Time is the log clock, which moves
// with the timestamps proposers stamp entries with (logclock.go). Topic ids are derived
// from the name and the command's log position. Validation failures are
// results (Kafka error codes), identical on every copy; a local fault (the
// batch failing) is an error the driver must not skip: package replica
// stops the process, and a restart replays the log into the copy.
//
// Several entries share one Batch, and Finish writes the applied position
// into it, so a store that commits batches whole always holds a prefix of
// the log and a restart resumes exactly after it.
//
// Changes (changes.go) says which partitions a batch changed as Fetch
// reads them, taken from the keys it wrote, so that the driver wakes only
// the long polls on those partitions. It is output only: nothing applied
// depends on it.
//
// Idempotent producers (producer.go): AllocateProducerID (type 13) hands
// out producer ids from the 0x10 counter, or bumps a known id's epoch.
// CommitObject checks each batch with a producer id against the 0x11
// state of its (partition, producer) as Kafka's ProducerStateManager
// does: a stale epoch is INVALID_PRODUCER_EPOCH, a gap or a new epoch not
// starting at sequence 0 is OUT_OF_ORDER_SEQUENCE_NUMBER, and a retry of
// one of the latest 5 batches gets its original base offset with no new
// offsets. State unwritten for producer.id.expiration.ms (1 day, by the
// log clock) is dropped when a batch next touches it; state no batch
// touches again stays until its topic is deleted, as no sweep exists yet.
//
// Transactions (txn*.go, types 14-19): a transactional id's coordinator
// state is one 0x12 record. AddPartitionsToTxn writes a 0x13 record per
// partition; CommitObject accepts a transactional batch only where its
// producer has one (KIP-890 part 1) and records the transaction's first
// offset there, which bounds the partition's last stable offset. EndTxn
// ends the transaction in one apply: a marker index entry (attribute
// bits control and commit, no object bytes) at the next offset of every
// added partition, a 0x14 entry per aborted range, the 0x15 offsets of
// its groups moved to 0x0A or dropped. Index values carry a trailing
// attribute varint only when a bit is set, so entries written before
// transactions existed are unchanged.
//
// Object garbage collection (gc.go, level 3): apply counts each object's
// index entries and queues an object whose count reaches zero, with the
// log clock; GCProgress (type 25) is the janitor's report of what it
// deleted. CommitObject refuses an object whose key time is below the
// orphan horizon, so the reconciler can tell orphans by key time alone.
//
// DeleteRecords (type 11) raises a partition's log start offset, never
// lowers it, and deletes the partition's index entries that end at or
// below the new start with one range deletion; the entry straddling the
// start stays, and readers skip the records below it.
//
// Compaction (compact.go, type 22, level 4): SwapIndex replaces a run
// of a partition's index entries with entries pointing into new
// objects, only if the index still holds exactly that run (a
// compare-and-swap), so retention, DeleteRecords, topic deletion and
// another compactor make it lose instead of losing or duplicating
// records; offsets never move, and for a topic that is not compacted
// the new entries must cover the old offsets exactly. An index value's
// attribute bit 3 (OwnOffsets, only from SwapIndex) marks an entry of a
// compacted topic whose batches carry their own offsets, with gaps.
//
// Retention (retention.go, type 21, level 3): ApplyRetention moves the
// log start of the partitions it names past the entries Kafka's
// retention.ms and retention.bytes would delete, by the log clock and the
// topic's configs (the proposer's broker defaults for what a topic does
// not set), never past the high watermark or the last stable offset,
// through the same trimIndex as DeleteRecords. From level 3 both also
// drop producer states and aborted transactions below the new start,
// and apply keeps per-partition storage numbers (storage.go) that
// commits add to and trims take from; raising a log to level 3 counts
// them from the index in the FinalizeFeatures apply.
package meta
