// Package history owns the checking of a Kafka workload's history, in the
// manner of Jepsen's Kafka workload (jepsen.tests.kafka): producers and
// consumers record every operation they attempt and what came of it, and
// Check looks through the whole record, after the run, for what a Kafka
// cluster must never do:
//
//   - lost-write: an acknowledged record (or one of a committed
//     transaction) that no consumer read, though consumers read past its
//     offset or drained its partition to the end;
//   - duplicate: one value stored at two offsets;
//   - inconsistent-offsets: two values at one offset;
//   - aborted-read: read_committed saw a record of an aborted
//     transaction (Jepsen's G1a);
//   - uncommitted-read: read_committed saw a record of a transaction
//     before its producer asked to commit it;
//   - nonmonotonic-poll: within a consumer's session of a partition (from
//     its assignment to its revocation), an offset at or below one it
//     already read;
//   - poll-skip: within a session, or across a group's members, offsets
//     passed over that hold a record the consumer's isolation level
//     should deliver and some consumer did read;
//   - partial-transaction: read_committed saw some but not all of a
//     committed transaction's records in a partition it read through;
//   - nonmonotonic-send: one producer's acknowledged records to a
//     partition stored out of the order it sent them;
//   - unwritten-read: a value read that no producer sent there.
//
// The package does no I/O and keeps no clock: the driver stamps each
// operation with times from one monotonic clock, and Check is a pure
// function of the operations.
//
// A record whose fate the client could not learn (a send that timed out,
// a commit whose reply was lost) is indeterminate: it may or may not
// exist, and only reads decide. A read_committed read of a record of an
// indeterminate transaction proves the transaction committed. What a
// client can tell of uncommitted reads is bounded by what it knows:
// before the producer asked to commit, no marker can exist, so a read
// then is proof; a read between the request and its reply may be of a
// commit already applied, and is not flagged.
package history

import (
	"fmt"
	"time"
)

// Isolation is a consumer's isolation level, as Fetch carries it.
type Isolation int8

const (
	ReadUncommitted Isolation = 0
	ReadCommitted   Isolation = 1
)

func (i Isolation) String() string {
	if i == ReadCommitted {
		return "read_committed"
	}
	return "read_uncommitted"
}

// TP names a topic partition.
type TP struct {
	Topic     string
	Partition int32
}

func (tp TP) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// Outcome is what a client learned of an operation it attempted.
type Outcome int8

const (
	// Unknown: the operation may or may not have taken effect (a
	// timeout, a connection lost before the reply).
	Unknown Outcome = iota
	// OK: the cluster confirmed it.
	OK
	// Failed: the cluster refused it; it took no effect.
	Failed
)

func (o Outcome) String() string {
	return [...]string{"unknown", "ok", "failed"}[o]
}

// Op is one recorded operation: *Send, *EndTxn, *Poll, *Assign or
// *Drained. A history lists each process's operations in the order the
// process performed them; operations of different processes may
// interleave in any order, since Check relates them only by their times.
type Op interface {
	process() string
}

// Send is one record a producer sent.
type Send struct {
	Process string
	// Txn names the transaction the record was sent in, unique over
	// the history; empty for a record sent outside one.
	Txn   string
	TP    TP
	Value string
	// Invoke is when the producer was handed the record, Complete when
	// its outcome arrived.
	Invoke, Complete time.Duration
	Outcome          Outcome
	// Offset is where the record was stored, with Outcome OK.
	Offset int64
}

// EndTxn is a producer's attempt to commit or abort a transaction. A
// producer may end one transaction more than once (an abort after a
// commit whose outcome it did not learn); a transaction for which commit
// was never attempted can only have aborted.
type EndTxn struct {
	Process          string
	Txn              string
	Commit           bool
	Invoke, Complete time.Duration
	Outcome          Outcome
}

// Poll is one poll of a consumer and the records it returned, in the
// order returned (per partition in offset order, if the cluster is
// right).
type Poll struct {
	Process string
	// Group is the consumer group the process reads in; empty for a
	// consumer that assigns itself partitions.
	Group     string
	Isolation Isolation
	// Invoke is when the poll was called, Complete when it returned:
	// every record returned was served by the cluster before Complete.
	Invoke, Complete time.Duration
	Records          []Record
}

// Record is one record a poll returned.
type Record struct {
	TP     TP
	Offset int64
	Value  string
}

// Assign is a change in the partitions a consumer reads: each partition
// added starts a session of it, each removed ends one. Offsets read
// within a session must rise, with no visible record passed over.
type Assign struct {
	Process   string
	At        time.Duration
	Isolation Isolation
	Added     []TP
	Removed   []TP
	// From is the offset the added partitions are read from, when the
	// consumer chose it; -1 when it resumes where its group committed,
	// which the history does not know.
	From int64
}

// Drained says a consumer read TP up to End (its high watermark, after
// every fault was healed and every transaction ended) in the session of
// its last Assign: every visible record below End must be among what it
// read. It ends the session.
type Drained struct {
	Process string
	At      time.Duration
	TP      TP
	End     int64
}

func (o *Send) process() string    { return o.Process }
func (o *EndTxn) process() string  { return o.Process }
func (o *Poll) process() string    { return o.Process }
func (o *Assign) process() string  { return o.Process }
func (o *Drained) process() string { return o.Process }

// Kind is a kind of anomaly, named as Jepsen's Kafka checker names it
// where it has the kind.
type Kind string

const (
	LostWrite          Kind = "lost-write"
	Duplicate          Kind = "duplicate"
	InconsistentOffset Kind = "inconsistent-offsets"
	AbortedRead        Kind = "aborted-read"
	UncommittedRead    Kind = "uncommitted-read"
	NonMonotonicPoll   Kind = "nonmonotonic-poll"
	PollSkip           Kind = "poll-skip"
	PartialTxn         Kind = "partial-transaction"
	NonMonotonicSend   Kind = "nonmonotonic-send"
	UnwrittenRead      Kind = "unwritten-read"
)

// Kinds lists every kind, in the order a report prints them.
var Kinds = []Kind{LostWrite, Duplicate, InconsistentOffset, AbortedRead, UncommittedRead,
	NonMonotonicPoll, PollSkip, PartialTxn, NonMonotonicSend, UnwrittenRead}

// Anomaly is one instance of a kind.
type Anomaly struct {
	Kind Kind
	// Process is the consumer or producer involved, or "group:NAME"
	// for what a whole group missed.
	Process string
	TP      TP
	Offset  int64
	Value   string
	// Detail says what was seen, for a person.
	Detail string
}

func (a Anomaly) String() string {
	s := fmt.Sprintf("%s %s offset %d", a.Kind, a.TP, a.Offset)
	if a.Value != "" {
		s += fmt.Sprintf(" value %q", a.Value)
	}
	if a.Process != "" {
		s += " (" + a.Process + ")"
	}
	if a.Detail != "" {
		s += ": " + a.Detail
	}
	return s
}
