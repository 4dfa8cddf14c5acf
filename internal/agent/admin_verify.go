package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/strandkafka/strand/internal/fetch"
)

// Storage verification on the admin API:
//
//	POST /v1/storage/verify  StorageVerifyRequest in (an empty body takes
//	                         the defaults), StorageVerifyReport out once
//	                         the walk is done
//
// The agent walks the offset index of its local copy, which every agent
// holds whole, and reads every entry's bytes from the object store at the
// requested pace, checking them as the fetch path does. The answer comes
// when the walk ends: the request lasts as long as the store takes at
// that pace, and the walk stops if the client goes away or the agent
// stops. One verification runs at a time per agent (409 otherwise).
const PathStorageVerify = "/v1/storage/verify"

// StorageVerifyRequest is the body of POST /v1/storage/verify.
type StorageVerifyRequest struct {
	// BytesPerSecond paces the object reads (each GET counts at least
	// 16 KiB); 0 means fetch.DefaultVerifyBytesPerSecond (16 MiB/s).
	BytesPerSecond int64 `json:"bytes_per_second,omitempty"`
	// MaxObjects bounds the damaged objects listed; 0 means
	// fetch.DefaultVerifyMaxObjects.
	MaxObjects int `json:"max_objects,omitempty"`
}

// StorageVerifyReport is the answer of POST /v1/storage/verify: what was
// checked and every damaged object found, with the partition offset
// ranges it holds.
type StorageVerifyReport = fetch.VerifyReport

// verifyJob is the running verification, if any.
type verifyJob struct {
	mu      sync.Mutex
	running bool
	stopped bool
	cancel  context.CancelFunc
}

// start claims the job; false if one is running or the agent stops.
func (j *verifyJob) start(cancel context.CancelFunc) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.running || j.stopped {
		return false
	}
	j.running, j.cancel = true, cancel
	return true
}

func (j *verifyJob) done() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.running, j.cancel = false, nil
}

// stop ends a running verification and refuses new ones, so that the
// HTTP server's Shutdown does not wait out a long walk.
func (j *verifyJob) stop() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stopped = true
	if j.cancel != nil {
		j.cancel()
	}
}

func (a *Agent) handleStorageVerify(w http.ResponseWriter, r *http.Request) {
	var req StorageVerifyRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAdminBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("request body: %w", err))
		return
	}
	if req.BytesPerSecond < 0 || req.MaxObjects < 0 {
		writeError(w, http.StatusBadRequest, errors.New("request body: bytes_per_second and max_objects must not be negative"))
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if !a.verify.start(cancel) {
		writeError(w, http.StatusConflict, errors.New("a storage verification is already running on this agent, or it is stopping"))
		return
	}
	defer a.verify.done()
	a.logger.Info("storage verification starting", "bytes_per_second", req.BytesPerSecond)
	rep, err := fetch.Verify(ctx, a.replica, a.store, fetch.VerifyOptions{
		BytesPerSecond: req.BytesPerSecond,
		MaxObjects:     req.MaxObjects,
		Damage:         a.damage,
	})
	if err != nil {
		a.logger.Warn("storage verification failed", "err", err, "entries", rep.Entries, "duration", rep.DurationNS)
		writeError(w, http.StatusBadGateway, err)
		return
	}
	a.logger.Info("storage verification done", "partitions", rep.Partitions, "entries", rep.Entries, "bytes", rep.Bytes,
		"damaged_objects", rep.DamagedObjects, "missing", rep.Missing, "corrupt", rep.Corrupt, "duration", rep.DurationNS)
	writeJSON(w, http.StatusOK, rep)
}
