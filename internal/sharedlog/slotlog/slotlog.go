// Package slotlog owns the loglet algorithm Strand runs on services that
// offer only a write-once slot with a conditional put and no
// transactions: DynamoDB (PutItem with attribute_not_exists) and S3
// (PutObject with If-None-Match). A backend maps slots onto its service
// with a Slots; Loglet does everything else: ordering, ambiguity,
// sealing and trimming. Backends: dynamolog, s3log.
//
// # The log in slots
//
// Position p of the log is slot p. A slot is written at most once, by a
// conditional put, and holds an entry or the seal marker. Every slot
// carries a random token chosen by its writer, so a writer that lost a
// reply can tell its own write from another's.
//
// The tail (the frontier) is the first slot at or above the trim point
// that holds no entry: an empty slot or the seal. Entries above the
// frontier exist but are invisible; readers never read past it, so a
// hole is never seen.
//
// # Ordering: leaderless compare-and-swap with a window
//
// Any handle may write any slot, and one slot has one winner. A handle
// hands its appends consecutive positions from its own view of the
// frontier and keeps up to InFlight slot writes running at once. It
// writes slot p only while p < base+Window, where base is a position
// below which it has seen every slot filled. So no slot is ever written at
// or past frontier+Window, and the tail can be found near the highest
// slot (see findFrontier). An append is acknowledged only once every slot
// below its own holds an entry: acknowledged means visible. An append
// that loses its slot to another writer takes a fresh one.
//
// The cost: a handle whose view is stale pays one failed put per slot it
// is behind (after Window such losses it rescans), and a crashed or
// failed write can leave entries above a hole. Those orphans become
// visible, in their slots, once someone fills the hole; their appends had
// returned an error, which the Log contract calls ambiguous, and the
// entries carry their writer's identity for deduplication above the log.
//
// # Ambiguous writes
//
// A put whose reply is lost is put again with identical bytes and token
// at the same slot until the result is definite: success, or "taken" and
// the occupant read back (the service may return it with the failure).
// The occupant's token tells whether the earlier try won. Never are two
// different payloads in one slot: the service's conditional put forbids
// it, and success is claimed only for the token's owner.
//
// That repeated put is how one append learns its own outcome, not a
// retry of the append: it is bounded (PutAttempts, paced by package
// retry), and an outcome still unknown after it fails the append as
// ambiguous. Appending the entry again is the caller's decision (the
// replica's appender, which deduplicates); a refusal the service gives
// for good (ErrRejected at the first put, ErrEntryTooLarge) is marked
// sharedlog.ErrRejected so that the caller does not.
//
// # Seal
//
// Seal puts a seal marker into the frontier slot. Appends that meet it
// fail with ErrSealed, and entries above it are never part of the log.
//
// # Trim and the grace period
//
// PrefixTrim raises a trim point record, then deletes the slots below
// it. A deleted slot looks empty, so a handle with a stale view could put
// an entry into it. Two rules close that hole without a read per append:
// slots are deleted only TrimGrace after the trim point that covers them
// was seen, and a handle trusts a trim point it read at most TrimGrace/2
// before its put (or read) completed; older than that, it reads the trim
// point again before it acknowledges. Only durations measured on each
// machine's own clock enter; a pause only makes both sides more careful.
// All handles of one log must use the same TrimGrace.
//
// # Time
//
// Every reading of the time (when a trim point was read, when a trim was
// seen, when a put's reply arrived) and every wait between puts comes
// from Config.Clock, so a test moves the grace period by hand.
package slotlog

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// Kind is what a slot holds.
type Kind uint8

const (
	// KindEntry: a log entry.
	KindEntry Kind = 1
	// KindSeal: the seal marker; the slot ends the log.
	KindSeal Kind = 2
)

func (k Kind) String() string {
	switch k {
	case KindEntry:
		return "entry"
	case KindSeal:
		return "seal"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k == KindEntry || k == KindSeal }

// Token identifies one write: random, chosen by the writer, stored in the
// slot.
type Token [16]byte

// NewToken returns a random token.
func NewToken() Token {
	var t Token
	// crypto/rand.Read never fails on supported platforms.
	_, _ = rand.Read(t[:])
	return t
}

// Slot is one slot's content.
type Slot struct {
	Pos   sharedlog.Pos
	Kind  Kind
	Token Token
	// Data is the entry; empty for a seal. A Slots must not modify or
	// retain it, and returns a slice the caller owns.
	Data []byte
}

// SlotInfo is what a scan reports about an occupied slot.
type SlotInfo struct {
	Pos  sharedlog.Pos
	Kind Kind
}

var (
	// ErrTaken: Slots.Put found the slot occupied and wrote nothing.
	ErrTaken = errors.New("slotlog: slot is taken")
	// ErrRejected: the service refused a request as malformed or
	// unauthorized; it was not applied, and repeating it will not help.
	ErrRejected = errors.New("slotlog: request rejected")
	// ErrCorrupt: a slot's stored content fails its checks, or the
	// service returned something the protocol rules out.
	ErrCorrupt = errors.New("slotlog: corrupt slot")
	// ErrEntryTooLarge: the entry exceeds the backend's MaxEntryBytes;
	// it was not written.
	ErrEntryTooLarge = errors.New("slotlog: entry too large")
)

// Slots maps slots onto one service. Methods may be called concurrently.
// Errors other than the sentinels named below are taken as "may or may
// not have happened"; a Slots need not retry, though it may retry reads.
type Slots interface {
	// Put writes s into slot s.Pos if the slot is empty. nil: written.
	// An error wrapping ErrTaken: the slot was occupied and nothing was
	// written; occupant is its content (Kind and Token at least) when the
	// service returned it, else nil and Loglet calls Probe. An error
	// wrapping ErrRejected: not applied. Put must not retry by itself: a
	// retried put whose first reply was lost would meet its own write.
	Put(ctx context.Context, s Slot) (occupant *Slot, err error)

	// Probe reads slot p's Kind and Token (Data may be left out). ok is
	// false if the slot is empty.
	Probe(ctx context.Context, p sharedlog.Pos) (s Slot, ok bool, err error)

	// Read returns occupied slots in [from, to), ascending, with data. It
	// may stop early to bound one reply; it must not skip an occupied slot
	// between two it returns.
	Read(ctx context.Context, from, to sharedlog.Pos) ([]Slot, error)

	// ScanUp returns the occupied slots at or above from, ascending, at
	// most limit of them; fewer than limit means there are no more. A
	// Slots that cannot scan upward returns errors.ErrUnsupported and
	// sets Config.TopOnly.
	ScanUp(ctx context.Context, from sharedlog.Pos, limit int) ([]SlotInfo, error)

	// ScanTop returns the highest occupied slots, descending, at most
	// limit of them; fewer than limit means there are no more.
	ScanTop(ctx context.Context, limit int) ([]SlotInfo, error)

	// TrimPoint returns the stored trim point, 0 if none. The read is
	// strongly consistent: it sees every raise that completed before it
	// was sent.
	TrimPoint(ctx context.Context) (sharedlog.Pos, error)

	// RaiseTrimPoint makes the stored trim point at least p; it never
	// lowers it.
	RaiseTrimPoint(ctx context.Context, p sharedlog.Pos) error

	// DeleteBelow deletes the occupied slots below p, in bounded batches.
	DeleteBelow(ctx context.Context, p sharedlog.Pos) error
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C that backends store beside an entry's data and
// check after reading it.
func Checksum(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }
