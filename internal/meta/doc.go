// Package meta owns Strand's replicated metadata database: the commands
// that change metadata, their log encoding, the deterministic apply of
// those commands to a local Pebble store, and the Replica that drives it —
// proposing commands through the shared log, playing the log forward, and
// serving local reads (View) and linearizable reads (Sync, then View).
//
// Every agent holds a full copy. No copy is ever written directly: a change
// is appended to the shared log as a command, and every copy applies the
// log in order, so copies that applied the same prefix hold the same bytes
// (Digest compares them).
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
// notion of time is the log clock, the max timestamp applied.
//
// A replica that meets an entry it cannot decode, or a command type or
// version it does not know, halts before it (ErrHalted) instead of
// guessing: every replica of that build stops at the same position, and a
// newer build moves on.
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
//	                                                   and (record version 2, when known) its applied position
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
// draws no random numbers, does no I/O but its Pebble batch, and never lets
// map iteration order reach the store. Topic ids are derived from the name
// and the command's log position. Validation failures are results (Kafka
// error codes), identical on every copy; a local fault (Pebble failing)
// stops the process (Config.FailStop, failstop.go) rather than skip an
// entry, and a restart replays the log into the copy.
//
// Several entries share one Pebble batch, and the batch also writes the
// applied position, so the store always holds a prefix of the log and a
// restart resumes exactly after it.
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
// Transactions (txn.go, types 14-19): a transactional id's coordinator
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
// DeleteRecords (type 11) raises a partition's log start offset, never
// lowers it, and deletes the partition's index entries that end at or
// below the new start with one range deletion; the entry straddling the
// start stays, and readers skip the records below it.
//
// # Snapshots
//
// Replica.Snapshot uploads a Pebble checkpoint to an object store; its
// position P is the applied position inside the checkpoint. Under the
// snapshot prefix:
//
//	snap/<P, 20 digits>.json   manifest (JSON): format (1), pos, digest (hex View.Digest at P),
//	                           created_at, writer_id, files: [{name, key, size, sha256}]
//	sst/<sha256 hex>           an SST or blob file, shared by every snapshot that holds it
//	aux/<sha256 hex>           any other checkpoint file (MANIFEST, OPTIONS, WAL, markers)
//
// Every object is content-addressed, hence immutable; the manifest is
// written last with PutIfAbsent, so a manifest only ever names objects
// that are complete. Restore fetches the newest one into an empty
// directory, checks sizes, checksums and the digest, and drops the 0xFF
// local keys. TrimLog trims the log below the newest complete snapshot, or
// below a lower bound the caller gives: an agent passes the lowest applied
// position of the live agents (View.LowestLiveApplied), so no live copy
// is trimmed past.
package meta
