package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
)

// The admin API, on the agent's HTTP address beside /healthz, /readyz
// and /metrics. Bodies are JSON; an error is {"error": "..."} with a
// 4xx or 5xx status. Before the agent is ready every endpoint answers
// 503. Every endpoint needs an authenticated caller with the Kafka
// permission it names below (admin_auth.go): 401 or 403 without; the
// POST endpoints also need Content-Type: application/json, body or not.
//
//	GET  /v1/log/status   LogStatus (DESCRIBE the cluster)
//	POST /v1/log/migrate  MigrateRequest in, MigrateResult out, once the
//	                      log has moved (VirtualLog.Reconfigure)
//	                      (ALTER the cluster, as every POST)
//	POST /v1/snapshot     SnapshotTakenStatus out: a metadata snapshot
//	                      taken now, and the log trimmed below it (or
//	                      below a live agent that has not applied that far)
//	POST /v1/storage/verify  see admin_verify.go
//	GET  /v1/topics/{name}/storage  see admin_storage.go (DESCRIBE the topic)
//	GET  /v1/topics/{name}/compaction  see admin_compaction.go (DESCRIBE the topic)
//	GET  /v1/cost         CostReport: this agent's counters priced, see
//	                      admin_cost.go (DESCRIBE the cluster)
const (
	PathLogStatus  = "/v1/log/status"
	PathLogMigrate = "/v1/log/migrate"
	PathSnapshot   = "/v1/snapshot"
)

const (
	// maxAdminBodyBytes bounds a request body: a MigrateRequest is one
	// URL, and segment URLs are at most 4 KiB.
	maxAdminBodyBytes = 64 << 10
	// migrateTimeout bounds one migration. It does not end with the
	// request: a client that hangs up mid-way must not leave the log
	// sealed and unextended (appenders would finish the move, but only
	// after VirtualOptions.StallTimeout).
	migrateTimeout = 2 * time.Minute
	// statusTimeout bounds the remote calls of one status request (the
	// log's tail, the snapshot listing).
	statusTimeout = 30 * time.Second
)

// LogStatus is the answer of GET /v1/log/status.
type LogStatus struct {
	Chain ChainStatus `json:"chain"`
	// Tail is the position the next entry will take; Sealed says the
	// active segment was found sealed (a migration is under way).
	Tail   uint64 `json:"tail"`
	Sealed bool   `json:"sealed,omitempty"`
	// TrimPoint: the entries below it are gone from the log.
	TrimPoint uint64 `json:"trim_point"`
	// Snapshot is the newest snapshot in the object store, nil if there
	// is none; SnapshotError says why it is unknown, if it is.
	Snapshot      *SnapshotStatus `json:"snapshot"`
	SnapshotError string          `json:"snapshot_error,omitempty"`
	// Agent is the agent that answered.
	Agent AgentStatus `json:"agent"`
	// Agents is the replicated agent table as the answering agent's copy
	// holds it, by node id: every agent's applied position as its newest
	// lease renewal reported it. Trimming stays below the lowest Applied
	// of the live ones.
	Agents []AgentLease `json:"agents"`
}

// AgentLease is one agent of the replicated agent table.
type AgentLease struct {
	NodeID  int32  `json:"node_id"`
	AgentID string `json:"agent_id"`
	// Host and Port are the Kafka address the agent advertises.
	Host string `json:"host"`
	Port int32  `json:"port"`
	// Applied is the applied position the agent's newest renewal
	// reported: every entry below it was in its copy then. 0 is also
	// what an agent of a build that does not report one shows; such an
	// agent holds trimming back entirely while its lease is live.
	Applied uint64 `json:"applied"`
	// Expires is when the lease ends, by the log clock; Live says it
	// ends after the log clock of the answering agent's copy.
	Expires time.Time `json:"expires"`
	Live    bool      `json:"live"`
	// Features are the levels the agent's build supports, as its newest
	// renewal reported them (from strand.metadata.version 2), by name:
	// "min-max". Empty for an agent registered at level 1.
	Features map[string]string `json:"features,omitempty"`
}

// ChainStatus is the VirtualLog's chain of segments, passwords redacted.
type ChainStatus struct {
	Version  uint64          `json:"version"`
	Segments []SegmentStatus `json:"segments"`
}

// SegmentStatus is one segment: it holds log positions [Start, End).
// For a sealed segment End is final; for the active (last, unsealed) one
// it is the tail when the status was taken.
type SegmentStatus struct {
	Start  uint64 `json:"start"`
	End    uint64 `json:"end"`
	Sealed bool   `json:"sealed"`
	URL    string `json:"url"`
}

// SnapshotStatus describes a snapshot in the object store.
type SnapshotStatus struct {
	// Pos is the snapshot's log position: it holds every entry below.
	Pos       uint64    `json:"pos"`
	Key       string    `json:"key"`
	CreatedAt time.Time `json:"created_at"`
	Files     int       `json:"files"`
	Bytes     int64     `json:"bytes"`
}

// AgentStatus is one agent's place in the log.
type AgentStatus struct {
	WriterID    string `json:"writer_id"`
	Incarnation uint64 `json:"incarnation"`
	// Applied is the next position the agent's replica applies: every
	// entry below it is in its metadata copy.
	Applied uint64 `json:"applied"`
}

// MigrateRequest is the body of POST /v1/log/migrate: the loglet URL of
// the segment to move the log onto, e.g.
// postgres://user@host:5432/db?log=strand/seg-1 or
// etcd://host:2379/strand/seg-1. The loglet must be new (empty).
type MigrateRequest struct {
	To string `json:"to"`
}

// MigrateResult is the answer of POST /v1/log/migrate. Migrating onto
// the active segment changes nothing, so that a retry after a lost answer
// succeeds: OldChain and NewChain are then the same, and SealedTail is
// where that segment starts.
type MigrateResult struct {
	OldChain ChainStatus `json:"old_chain"`
	NewChain ChainStatus `json:"new_chain"`
	// SealedTail is where the old active segment was sealed and the new
	// one starts.
	SealedTail uint64 `json:"sealed_tail"`
	// DurationNS is how long the migration took, in nanoseconds.
	DurationNS time.Duration `json:"duration_ns"`
}

// SnapshotTakenStatus is the answer of POST /v1/snapshot.
type SnapshotTakenStatus struct {
	Snapshot SnapshotStatus `json:"snapshot"`
	// UploadedFiles and UploadedBytes are what this snapshot added to
	// the store; the rest it shares with earlier ones.
	UploadedFiles int   `json:"uploaded_files"`
	UploadedBytes int64 `json:"uploaded_bytes"`
	// TrimPoint is the log's trim point afterwards.
	TrimPoint uint64 `json:"trim_point"`
	// TrimHeldBy is the live agent whose applied position kept the trim
	// point below the newest snapshot, if one did.
	TrimHeldBy *AgentLease `json:"trim_held_by,omitempty"`
	// GC is what the snapshot GC after the snapshot deleted.
	GC SnapshotGCStatus `json:"gc"`
	// GCError says why the GC stopped, if it failed; the snapshot
	// stands and the next GC deletes what this one left.
	GCError    string        `json:"gc_error,omitempty"`
	DurationNS time.Duration `json:"duration_ns"`
}

// SnapshotGCStatus is what one snapshot GC did (replica.GCResult).
type SnapshotGCStatus struct {
	ManifestsDeleted int   `json:"manifests_deleted"`
	FilesDeleted     int   `json:"files_deleted"`
	BytesDeleted     int64 `json:"bytes_deleted"`
	// Deferred: another agent's snapshot was in progress, so no file
	// was deleted; the next GC deletes them.
	Deferred bool `json:"deferred"`
}

// mountAdmin adds the admin API to mux.
func (a *Agent) mountAdmin(mux *http.ServeMux) {
	// The reads name the cluster's agents and log or a topic's
	// partitions, so they are no more open than Kafka's Describe* are.
	clusterDescribe := func(*http.Request) httpNeed { return needClusterDescribe }
	mux.HandleFunc("GET "+PathLogStatus, a.ifReady(a.ifAllowed(clusterDescribe, a.handleLogStatus)))
	mux.HandleFunc("GET "+PathCost, a.ifReady(a.ifAllowed(clusterDescribe, a.handleCost)))
	mux.HandleFunc("POST "+PathLogMigrate, a.ifReady(a.ifAdmin(a.handleLogMigrate)))
	mux.HandleFunc("POST "+PathSnapshot, a.ifReady(a.ifAdmin(a.handleSnapshot)))
	mux.HandleFunc("POST "+PathStorageVerify, a.ifReady(a.ifAdmin(a.handleStorageVerify)))
	mux.HandleFunc("GET "+PathShareGroupState, a.ifReady(a.ifAllowed(needGroupDescribe, a.handleShareGroupState)))
	mux.HandleFunc("GET "+PathTopicCompaction, a.ifReady(a.ifAllowed(needTopicDescribe, a.handleTopicCompaction)))
	mux.HandleFunc("GET "+PathTopicStorage, a.ifReady(a.ifAllowed(needTopicDescribe, a.handleTopicStorage)))
	mux.HandleFunc("GET "+PathZones, a.ifReady(a.ifAllowed(clusterDescribe, a.handleZones)))
}

// ifReady answers 503 until Start has opened everything: the handlers
// use fields Start sets, and a.ready orders those writes before the
// handlers' reads.
func (a *Agent) ifReady(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.ready.Load() {
			writeError(w, http.StatusServiceUnavailable, errors.New("agent not ready"))
			return
		}
		h(w, r)
	}
}

func (a *Agent) handleLogStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), statusTimeout)
	defer cancel()
	st, code, err := a.logStatus(ctx)
	if err != nil {
		writeError(w, code, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// logStatus is GET /v1/log/status's answer, or its error and HTTP
// status. The web console shows it too (console.go).
func (a *Agent) logStatus(ctx context.Context) (LogStatus, int, error) {
	tail, sealed, err := a.log.CheckTail(ctx)
	if err != nil {
		return LogStatus{}, http.StatusBadGateway, fmt.Errorf("log tail: %w", err)
	}
	// Read after the tail, so the chain is at least as new.
	c := a.log.Chain()
	st := LogStatus{
		Chain:     chainStatus(c, tail),
		Tail:      uint64(tail),
		Sealed:    sealed,
		TrimPoint: uint64(c.TrimPoint),
		Agent: AgentStatus{
			WriterID:    a.replica.WriterID(),
			Incarnation: a.replica.Incarnation(),
			Applied:     uint64(a.replica.NextToApply()),
		},
	}
	if st.Agents, err = a.agentLeases(); err != nil {
		return LogStatus{}, http.StatusInternalServerError, fmt.Errorf("agent table: %w", err)
	}
	snap, err := replica.LatestSnapshot(ctx, a.store, SnapshotPrefix)
	switch {
	case errors.Is(err, replica.ErrNoSnapshot):
	case err != nil:
		st.SnapshotError = err.Error()
	default:
		s := snapshotStatus(snap)
		st.Snapshot = &s
	}
	return st, http.StatusOK, nil
}

// agentLeases reads the agent table from the local copy.
func (a *Agent) agentLeases() ([]AgentLease, error) {
	v := a.replica.View()
	defer v.Close()
	clock, err := v.LogClock()
	if err != nil {
		return nil, err
	}
	as, err := v.Agents()
	if err != nil {
		return nil, err
	}
	ls := make([]AgentLease, len(as))
	for i, ag := range as {
		ls[i] = agentLease(ag)
		ls[i].Live = ag.Expires > clock
	}
	return ls, nil
}

func agentLease(ag meta.AgentInfo) AgentLease {
	l := AgentLease{
		NodeID: ag.NodeID, AgentID: ag.AgentID, Host: ag.Host, Port: ag.Port,
		Applied: uint64(ag.Applied), Expires: time.UnixMilli(ag.Expires).UTC(),
	}
	for _, f := range ag.Features {
		if l.Features == nil {
			l.Features = map[string]string{}
		}
		l.Features[f.Name] = fmt.Sprintf("%d-%d", f.Min, f.Max)
	}
	return l
}

func (a *Agent) handleLogMigrate(w http.ResponseWriter, r *http.Request) {
	var req MigrateRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAdminBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("request body: %w", err))
		return
	}
	if strings.TrimSpace(req.To) == "" {
		writeError(w, http.StatusBadRequest, errors.New(`request body: "to" names no loglet URL`))
		return
	}
	if logurl.HasPassword(req.To) {
		// The chain would keep it, and the other agents could not open
		// the segment anyway: they read its URL from the chain.
		writeError(w, http.StatusBadRequest, fmt.Errorf("migrate to %s: the URL carries a password, which the log chain would store; give every agent the password (PGPASSWORD, a password file, or --log-password-file) and the URL without it", RedactURL(req.To)))
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), migrateTimeout)
	defer cancel()
	to := RedactURL(req.To)
	old, err := a.currentChain(ctx)
	if err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	a.logger.Info("log migration starting", "to", to, "chain_version", old.Version, "active", RedactURL(old.Active().URL))
	start := time.Now()
	err = a.log.Reconfigure(ctx, req.To)
	took := time.Since(start)
	if err != nil {
		// The log's errors name the URLs they met as given, passwords
		// and all.
		msg := redactURLsIn(err.Error(), append(segmentURLs(old), req.To)...)
		a.logger.Error("log migration failed", "to", to, "err", msg, "duration", took)
		writeError(w, migrateErrorStatus(err), fmt.Errorf("migrate to %s: %s", to, msg))
		return
	}
	next := a.log.Chain()
	sealedTail := next.Active().Start
	a.logger.Info("log migrated", "to", to, "sealed_tail", sealedTail, "chain_version", next.Version, "duration", took)
	writeJSON(w, http.StatusOK, MigrateResult{
		OldChain:   chainStatus(old, sealedTail),
		NewChain:   chainStatus(next, sealedTail),
		SealedTail: uint64(sealedTail),
		DurationNS: took,
	})
}

// currentChain returns the chain as of now: CheckTail rereads it if the
// active segment was sealed by someone else.
func (a *Agent) currentChain(ctx context.Context) (sharedlog.Chain, error) {
	if _, _, err := a.log.CheckTail(ctx); err != nil {
		return sharedlog.Chain{}, fmt.Errorf("log tail: %w", err)
	}
	return a.log.Chain(), nil
}

// migrateErrorStatus maps a Reconfigure error to an HTTP status: the
// caller's fault (400), a state that forbids it now (409), or the
// backends' (502).
func migrateErrorStatus(err error) int {
	switch {
	case errors.Is(err, logurl.ErrBadURL), errors.Is(err, sharedlog.ErrInvalidChain):
		return http.StatusBadRequest
	case errors.Is(err, sharedlog.ErrConflict), errors.Is(err, sharedlog.ErrSealed),
		errors.Is(err, sharedlog.ErrSegmentNotEmpty):
		return http.StatusConflict
	}
	return http.StatusBadGateway
}

func (a *Agent) handleSnapshot(w http.ResponseWriter, r *http.Request) {
	res, err := a.snapshots.run(r.Context())
	if errors.Is(err, errStopping) {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	st := SnapshotTakenStatus{
		Snapshot:      snapshotStatus(res.Snapshot),
		UploadedFiles: res.Snapshot.UploadedFiles,
		UploadedBytes: res.Snapshot.UploadedBytes,
		TrimPoint:     uint64(res.TrimPoint),
		GC: SnapshotGCStatus{
			ManifestsDeleted: res.GC.ManifestsDeleted,
			FilesDeleted:     res.GC.FilesDeleted,
			BytesDeleted:     res.GC.BytesDeleted,
			Deferred:         res.GC.Deferred,
		},
		DurationNS: res.Duration,
	}
	if res.GCErr != nil {
		st.GCError = res.GCErr.Error()
	}
	if res.HeldBy != nil {
		// It was live when the trim was decided.
		l := agentLease(*res.HeldBy)
		l.Live = true
		st.TrimHeldBy = &l
	}
	writeJSON(w, http.StatusOK, st)
}

func chainStatus(c sharedlog.Chain, tail sharedlog.Pos) ChainStatus {
	cs := ChainStatus{Version: c.Version, Segments: make([]SegmentStatus, len(c.Segments))}
	for i, s := range c.Segments {
		end := s.End
		if !s.Sealed {
			end = max(tail, s.Start)
		}
		cs.Segments[i] = SegmentStatus{Start: uint64(s.Start), End: uint64(end), Sealed: s.Sealed, URL: RedactURL(s.URL)}
	}
	return cs
}

func snapshotStatus(s replica.SnapshotInfo) SnapshotStatus {
	return SnapshotStatus{Pos: uint64(s.Pos), Key: s.Key, CreatedAt: s.CreatedAt, Files: s.Files, Bytes: s.Bytes}
}

// redactedSecret replaces a secret in a URL, as url.URL.Redacted does.
const redactedSecret = "xxxxx"

// RedactURL hides the secrets a log URL may carry: the password of its
// user info and query parameters that name a password, secret or token
// (pgx takes password=...). A URL that does not parse is hidden whole
// past its scheme, since where its secret sits is unknown.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if scheme, _, ok := strings.Cut(raw, "://"); ok {
			return scheme + "://" + redactedSecret
		}
		return redactedSecret
	}
	q := u.Query()
	changed := false
	for k := range q {
		lk := strings.ToLower(k)
		if strings.Contains(lk, "password") || strings.Contains(lk, "secret") || strings.Contains(lk, "token") {
			q.Set(k, redactedSecret)
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// redactURLsIn returns msg with each of urls, bare or as %q quotes it,
// shown as RedactURL shows it.
func redactURLsIn(msg string, urls ...string) string {
	for _, u := range urls {
		red := RedactURL(u)
		if red == u {
			continue
		}
		quoted := strconv.Quote(u)
		msg = strings.ReplaceAll(msg, quoted[1:len(quoted)-1], red)
		msg = strings.ReplaceAll(msg, u, red)
	}
	return msg
}

func segmentURLs(c sharedlog.Chain) []string {
	urls := make([]string, len(c.Segments))
	for i, s := range c.Segments {
		urls[i] = s.URL
	}
	return urls
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v) // the client hanging up is its own business
}

// ErrorBody is the JSON body of every admin API error.
type ErrorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, ErrorBody{Error: err.Error()})
}
