// Package pgsource owns the PostgreSQL source connector
// (io.debezium.connector.postgresql.PostgresConnector): PostgreSQL's
// logical replication (pgoutput) into one topic per table, each change
// in Debezium's envelope, each PostgreSQL transaction inside one
// Strand (Kafka) transaction.
//
// # Start
//
// A task first initializes its transactional producer
// (TransactionalID: an earlier owner is fenced, its open transaction
// aborted), then reads its last committed Offset from OffsetsTopic
// (read_committed). Nothing in Env.Dir is used: a task moved to
// another agent resumes from the same two places, the offset and the
// slot. The publication is created if missing
// (publication.autocreate.mode). Then:
//
//   - no offset, or a snapshot interrupted half-way, and
//     snapshot.mode=initial: the slot is (re)created with an exported
//     snapshot; every published, captured table is read in one
//     REPEATABLE READ transaction on that snapshot (op "r"), committed
//     to Kafka in transactions of 100,000 rows, the last
//     one carrying the offset {snapshot_completed, lsn: the slot's
//     consistent point}. Streaming starts at that point: what
//     committed before it is in the snapshot, what committed after it
//     is streamed. A restart before the snapshot's last transaction
//     committed drops the slot and snapshots again from the start, as
//     Debezium does, so the "r" events of the interrupted snapshot's
//     committed transactions appear twice;
//   - an offset: streaming resumes from it;
//   - no offset and snapshot.mode never or no_data: the slot is created
//     if missing and streamed from where it stands.
//
// # Exactly once
//
// The server resends from the slot's confirmed_flush_lsn, which may
// be behind the committed offset (the task stopped between the Kafka
// commit and the confirmation). A transaction whose commit LSN is at
// or below the offset's lsn_commit is skipped. Changes are produced as
// they are decoded (the producer's buffer and the reader's queue are
// bounded, so a transaction larger than memory streams through, its
// Kafka transaction open meanwhile); a Kafka transaction is committed
// only at a PostgreSQL commit: when nothing more has arrived from the
// server (so a batch holds what came in during the last commit: one
// transaction when the source keeps up, many when it is behind), once
// it holds max.batch.size records, or once it has been open
// poll.interval.ms, with the offset record of its last
// PostgreSQL transaction in it. Only after that commit is the
// transaction's end LSN confirmed to the server (flush and apply
// positions of the standby status update). A read_committed consumer
// therefore sees each PostgreSQL transaction whole or not at all, and
// once.
//
// A slot held by another walsender (an earlier owner, fenced but idle,
// so unaware) is waited for, then that walsender is terminated
// (slotBusy).
//
// The reader goroutine owns the replication connection: it answers
// keepalives and sends the confirmed LSN every
// status.update.interval.ms even while the writer is behind, and a
// keepalive's WAL position is confirmed once everything before it has
// been committed, so WAL of tables not captured does not pile up.
//
// # Offsets
//
// OffsetsTopic is shared by every connector: one partition, compacted,
// keyed as Kafka Connect keys source offsets
// (["<name>",{"server":"<topic.prefix>"}]), the value an Offset in
// JSON. Another connector's open transaction there holds the last
// stable offset back, so readOffset reads read_uncommitted and keeps a
// value only once its commit marker follows; it reads a window before
// the end, grown until it holds one of this connector's committed
// values (the first such window holds the last: this connector's
// transactions run one after another).
//
// # Events
//
// One topic per table, <topic.prefix>.<schema>.<table>, created with
// topic.creation.default.partitions (1); the key is the primary key's
// columns (null for a table without one). Values are Debezium's
// envelope (before, after, source, transaction, op, ts_ms/us/ns) in
// Kafka Connect's JsonConverter form, {"schema", "payload"}, or the
// bare payload when *.converter.schemas.enable=false, or, with
// *.converter=io.confluent.connect.avro.AvroConverter, that JSON form
// converted by package avroconv (its schema registered, the payload in
// Confluent's wire format). Types follow
// Debezium's mapping with time.precision.mode=adaptive (types.go);
// a type Strand does not map is its PostgreSQL text as a string. An
// update under REPLICA IDENTITY DEFAULT has no before image; under
// FULL it has the old row. An update that changes the key is, as in
// Debezium, a delete of the old key (and its tombstone) and a create.
// A delete is followed by a tombstone when tombstones.on.delete.
// Schema changes show in the next event: pgoutput sends a Relation
// message before the first change after one. Truncates are skipped
// (Debezium's default skipped.operations=t).
package pgsource
