// Package jdbcsink owns the database sink of change data capture:
// records of topics written into tables of PostgreSQL or MariaDB/MySQL,
// exactly once, configured as Debezium's JDBC sink connector is
// (connector.class io.debezium.connector.jdbc.JdbcSinkConnector, its
// key names and defaults). Class gives the connector class to the
// runner of package connect; the agent lists it.
//
// # Records
//
// Each topic goes to one table, named by table.name.format (default
// ${topic}) with every dot made an underscore, as Debezium's default
// naming strategy does: topic srv.public.orders, table
// srv_public_orders. A record's value is a Debezium change event
// ({"before", "after", "op", ...}: c, r and u write the "after" row, d
// deletes), or a flat JSON object (a row); either bare or in Connect's
// JsonConverter form with schemas ({"schema", "payload"}); with
// *.converter=io.confluent.connect.avro.AvroConverter, keys and values
// in Confluent's wire format are first turned into that JSON form by
// package avroconv (the writer's schema fetched by id), so everything
// after is the same for both converters. A null value
// (a tombstone) deletes. Deletes happen only with delete.enabled, which
// as in Debezium needs primary.key.mode=record_key; without it they are
// skipped. Truncate and message events ("t", "m") are skipped.
//
// Column types come from the Debezium schema when the record has one
// (Date, Time, MicroTime, Timestamp, MicroTimestamp, NanoTimestamp,
// ZonedTimestamp, Decimal and VariableScaleDecimal, bytes as base64,
// Json, Uuid), else from the JSON (boolean, bigint, double, text,
// JSON). Timestamps are written in UTC.
//
// # Keys and modes
//
// primary.key.mode record_key takes the key's columns from the record
// key (a JSON object, or a primitive named by the one
// primary.key.fields); record_value takes primary.key.fields from the
// row; none has no key. insert.mode insert writes INSERTs, upsert
// INSERT ... ON CONFLICT (key) DO UPDATE (PostgreSQL) or INSERT ... ON
// DUPLICATE KEY UPDATE (MariaDB), update UPDATEs by key.
//
// # Tables
//
// With schema.evolution=basic (or auto.create=true, which creates but
// does not alter) a missing table is created with the records' key as
// its primary key, and with schema.evolution=basic a missing column is
// added (nullable). A table that cannot take the records stops the
// task with an error naming table and column: a column missing without
// schema evolution, or of a type the records' values do not fit (text
// into an integer column, bytes into anything but a binary one). The
// DDL runs before, not in, a batch's transaction (MariaDB commits at
// any DDL); it is idempotent, so a batch rolled back after it is
// harmless.
//
// # Exactly once
//
// The task consumes its topics' partitions directly (no consumer
// group), read_committed, and writes in batches: up to batch.size
// records (default 500), or what had arrived when the last batch was
// written, without waiting for more. Each batch is
// one database transaction that
//
//  1. locks the connector's rows of the sink's own table,
//     strand_connect_offsets (connector, topic, kafka_partition,
//     next_offset), with SELECT ... FOR UPDATE, and checks that they
//     hold what this task last read or wrote;
//  2. writes the batch's rows: per table, each key's changes coalesced
//     to their net effect (a delete, then the last row), deletes as
//     DELETE ... WHERE (key) IN (...), rows as multi-row INSERTs;
//  3. writes each partition's next offset, and commits.
//
// A task starts from the offsets in that table. So rows and offsets
// move together: after kill -9 of the agent, a restart of the
// database, or a cancel at any point, the next start resumes exactly
// after the last committed batch, neither losing nor repeating a
// record. Two tasks of one connector running at once (a placement move
// while agents disagree) cannot both apply a batch: the second to lock
// the offsets finds them moved (or collides on a partition's first
// row), rolls back, and starts again from the table.
//
// # Limits
//
// One task per connector (tasks.max is accepted and ignored). What a
// batch holds in memory is bounded by batch.size (at most 100,000) and
// the client's fetch limits; a statement by 65,535 parameters and about
// 4 MiB of values. primary.key.mode=kafka, errors.tolerance and a dead
// letter queue are not supported.
package jdbcsink
