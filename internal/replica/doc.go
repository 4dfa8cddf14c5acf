// Package replica drives the metadata state machine (package meta) over
// the shared log and Pebble: one Replica is one agent's copy of the
// metadata database.
//
// It owns everything impure about the copy:
//   - proposing (propose.go): commands queued by Propose, ProposeBatch and
//     Submit are cut into log entries, one append at a time (group
//     commit), an ambiguous append retried with identical bytes. This is
//     the one place an entry is sent again: the log's backends finish
//     one attempt and return (see sharedlog.Log.Append), and apply drops
//     a second copy by its writer id, incarnation and sequence;
//   - playing (replica.go): the log is read from the copy's applied
//     position and applied by a meta.Applier into a Pebble indexed batch
//     (pebble.go adapts Pebble to meta's key-value interface), committed
//     with the applied position; results go back to this copy's
//     proposers, and a poison entry halts the copy (ErrHalted);
//   - waking long polls (Watch): after each batch, the partitions it
//     changed (meta.Changes) wake the watches on them (package
//     partwatch); a halt and Close wake them all;
//   - linearizable reads (sync.go): Sync checks the tail, concurrent
//     callers sharing checks, and waits until the copy has played to it
//     (the check, made through the log, wakes the player between polls
//     but never cancels a request it has in flight); View then reads
//     the local copy;
//   - fail-stop (failstop.go): a failed write under Pebble ends the
//     process, which rebuilds the copy from its files and the log;
//   - snapshots (snapshot.go, manifest.go): Pebble checkpoints to and from
//     an object store, and trimming the log below them.
//
// # Time
//
// Config.Clock (package clock) is the only time the replica reads: the
// timestamp stamped on each entry, which is all the time apply sees; the
// default incarnation; a snapshot's date; and the waits of the append
// retries, the player's read retries and the tail polls of a log that is
// not a sharedlog.TailWaiter. The per-call timeouts of log operations
// stay on the wall clock: no test needs to move them.
//
// # Idle polling
//
// On a log whose backend bills every request (S3, DynamoDB) the
// VirtualLog polls for other agents' appends only every few seconds
// unless a reader is eager (sharedlog.Eager). The copy is eager while a
// partition watch is live (a long-polling Fetch, or a fetch session
// between requests): that is when a client waits for what another agent
// appends, and the log then polls every PollInterval and at once when
// the first watch registers. An agent with no such client costs a
// request every IdlePollInterval; one serving a waiting consumer sees
// another agent's commit within a poll interval. Everything else that
// must see the newest entries asks for them: Sync checks the tail and
// wakes the player, and this copy's own appends wake it too. A wake-up
// ends the wait between polls, never a request in flight: a cancelled
// request is billed all the same, and dynalite dies of a burst of them.
// The player's wait in the log therefore has no context of its own.
//
// The layout of the keys and log entries is package meta's, drawn in its
// documentation; what this package adds to Pebble is the local key (0xFF)
// where a copy records the incarnations it used.
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
//	pending/<writer>/<run>.json  a snapshot in progress: {writer_id, run, started_at}
//	gc/<writer>/<run>.json       a snapshot GC in progress: {writer_id, run, started_at}
//
// Every object is content-addressed, hence immutable; the manifest is
// written last with PutIfAbsent, so a manifest only ever names objects
// that are complete. Restore fetches the newest one into an empty
// directory, checks sizes, checksums and the digest, and drops the 0xFF
// local keys. TrimLog trims the log below the newest complete snapshot, or
// below a lower bound the caller gives: an agent passes the lowest applied
// position of the live agents (View.LowestLiveApplied), so no live copy
// is trimmed past. Replica.CollectSnapshots keeps the newest N manifests
// and deletes the rest, then the files no manifest names; the two
// markers keep it from deleting a file a snapshot in progress found in
// the store and chose not to upload. A marker's age is how long the
// reader has seen it, on the reader's clock: agents' clocks are never
// compared (snapshot_gc.go).
//
// Snapshots live here rather than in a package of their own because they
// are Pebble checkpoints: taking one needs the live store (flush, then a
// checkpoint with the WAL flushed), and restoring one opens Pebble to drop
// the local keys and check the digest.
package replica
