package agent

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/offsetstopic"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
)

// Fail-stop or recover, never limp. A local write failure either heals
// by itself when the fault clears or ends the process at once:
//
//   - The file loglet (the shared log's embedded backend) is the durable
//     copy. It cuts a failed write off and takes writes again as soon as
//     the disk does (package filelog). Meanwhile appends fail: produce
//     requests get a retriable Kafka error within meta's few quick append
//     retries, and /readyz answers 503 (appendHealth).
//   - The Pebble copy of the metadata is soft state, and Pebble does not
//     survive a failed write of its own files (package meta, failstop.go).
//     The replica calls failStop, which exits: a restart rebuilds the copy
//     from its files and the log.

// FailStopExitCode is the exit status of an agent that stopped because
// its local state can no longer be trusted; unlike 1 (bad flags, a
// failed start) a restart is the cure.
const FailStopExitCode = 3

// testSeams are the hooks this package's tests set (export_test.go).
type testSeams struct {
	// exit replaces os.Exit in failStop. It may return, unlike os.Exit.
	exit func(code int)
	// logFS and metaFS replace the file systems of the file loglet and
	// of Pebble, to inject faults.
	logFS  filelog.FS
	metaFS vfs.FS
	// clock replaces the wall clock of everything the agent starts.
	clock clock.Clock
	// offsetsProducer wraps the produce path the __consumer_offsets
	// records go through, to inject faults.
	offsetsProducer func(offsetstopic.Producer) offsetstopic.Producer
	// applied runs in the apply loop after each batch holding this
	// agent's own entries; blocking in it stalls apply.
	applied func()
	// connectClasses are added to the connector classes
	// (connect_classes.go), for tests with a fake class.
	connectClasses []connect.Class
}

// failStop ends the process: err made the local state untrustworthy.
// It is the one place the agent exits from on its own.
func (a *Agent) failStop(err error) {
	a.ready.Store(false)
	a.logger.Error("strand agent stopping at once: its local state cannot be trusted after this failure; "+
		"a restart rebuilds it from the shared log and the snapshots",
		"err", err, "exit_code", FailStopExitCode)
	exit := os.Exit
	if a.cfg.testing.exit != nil {
		exit = a.cfg.testing.exit
	}
	exit(FailStopExitCode)
}

// appendHealth tracks whether appends to the shared log work, for
// /readyz: the outcome of the newest append through timedLog. Appends
// come at least with every lease renewal (Lease/3), so readiness follows
// the log within that long even without client traffic.
type appendHealth struct {
	mu struct {
		sync.Mutex
		err   error     // of the newest append, nil if it succeeded
		since time.Time // of the first of the failures in a row
	}
}

func (h *appendHealth) record(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil && h.mu.err == nil {
		h.mu.since = time.Now()
	}
	h.mu.err = err
}

// failing returns why appends fail, or nil if the newest one succeeded.
func (h *appendHealth) failing() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.err == nil {
		return nil
	}
	return fmt.Errorf("appends to the shared log fail (since %s): %w",
		h.mu.since.UTC().Format(time.RFC3339), h.mu.err)
}
