package meta

// Connectors (metadata level 8): the definitions of Kafka Connect's
// REST API that every agent serves (package connect), kept like all
// metadata so every agent knows every connector, places it with the
// same ring and answers its status from its own copy.
//
// A definition is a name, a config and its owner principal, with what
// the REST API changes on it: the target state (RUNNING or PAUSED) and
// a generation that a restart or a changed config raises, so the agent
// running the task starts it again. The task's status (RUNNING or
// FAILED, the worker that runs it, the failure's trace) is written by
// that agent, about one generation: a status about an older one (a task
// stopped since, whose last words arrive late) changes nothing.
//
// What a config means is the connector class's business (package
// connect and the classes): apply checks what the record can tell,
// names and sizes. Secret values never reach here: the proposer stores
// them in the object store and the config holds a reference.
//
// Refusals carry the HTTP status Connect answers with in
// Result.ConnectorError (400, 404, 409), which the REST API passes on.

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Record prefixes of the connectors.
const (
	// prefixConnector keys a connector by name.
	prefixConnector byte = 0x30
	// prefixConnectorCounter is the one record of how many connectors
	// exist.
	prefixConnectorCounter byte = 0x31
)

var keyConnectorCounter = []byte{prefixConnectorCounter}

// Command types of the connectors, written from level 8.
const (
	TypePutConnector         CommandType = 37
	TypeDeleteConnector      CommandType = 38
	TypeConnectorTargetState CommandType = 39
	TypeRestartConnector     CommandType = 40
	TypeConnectorTaskStatus  CommandType = 41
)

// Limits of apply, part of what apply means.
const (
	// MaxConnectorNameBytes bounds a connector's name: it is a URL
	// path segment, a placement key and a directory name.
	MaxConnectorNameBytes = 255
	// MaxConnectorConfigEntries bounds a config's keys (Debezium's
	// and the JDBC sink's documented keys are under 150).
	MaxConnectorConfigEntries = 512
	// MaxConnectorKeyBytes and MaxConnectorValueBytes bound one entry,
	// MaxConnectorConfigBytes all of them: every copy keeps them.
	MaxConnectorKeyBytes    = 255
	MaxConnectorValueBytes  = 64 << 10
	MaxConnectorConfigBytes = 256 << 10
	// MaxConnectorTraceBytes bounds a failed task's trace; the
	// proposer cuts a longer one.
	MaxConnectorTraceBytes = 8 << 10
	// MaxConnectorWorkerBytes bounds a worker id (host:port).
	MaxConnectorWorkerBytes = 1024
	// MaxConnectors bounds the connectors: every agent reconciles all
	// of them.
	MaxConnectors = 1000
)

// ConnectorState is a connector's target state.
type ConnectorState uint8

const (
	ConnectorRunning ConnectorState = 1
	ConnectorPaused  ConnectorState = 2
)

// String is the state as Connect's status JSON names it.
func (s ConnectorState) String() string {
	switch s {
	case ConnectorRunning:
		return "RUNNING"
	case ConnectorPaused:
		return "PAUSED"
	}
	return "UNASSIGNED"
}

// TaskState is what the task's agent last said of it.
type TaskState uint8

const (
	// TaskUnassigned: no status about the current generation yet.
	TaskUnassigned TaskState = 0
	TaskRunning    TaskState = 1
	TaskFailed     TaskState = 2
)

// String is the state as Connect's status JSON names it.
func (s TaskState) String() string {
	switch s {
	case TaskRunning:
		return "RUNNING"
	case TaskFailed:
		return "FAILED"
	}
	return "UNASSIGNED"
}

// PutMode says whether a PutConnector may create, replace, or either.
type PutMode uint8

const (
	// PutCreateOrUpdate: PUT /connectors/{name}/config.
	PutCreateOrUpdate PutMode = 0
	// PutCreate: POST /connectors, 409 when the name exists.
	PutCreate PutMode = 1
	// PutUpdate: replace an existing config only, 404 when there is
	// none (a PUT whose proposer read the old config to keep its
	// secrets).
	PutUpdate PutMode = 2
)

// PutConnector creates a connector or replaces its config. Config holds
// no secret value (see the file's doc); Owner is the principal that
// created it (kept on update). A new connector starts RUNNING at
// generation 1; a changed config raises the generation, an unchanged
// one changes nothing.
// Result: ConnectorCreated, ConnectorGeneration; or ConnectorError 400
// (name, sizes), 409 (PutCreate of a name that exists, or the catalog
// is full), 404 (PutUpdate of a name that does not).
type PutConnector struct {
	Name   string
	Config map[string]string
	Owner  string
	Mode   PutMode
}

// DeleteConnector deletes a connector and its status.
// Result: ConnectorError 404 when it does not exist.
type DeleteConnector struct {
	Name string
}

// ConnectorTargetState pauses or resumes a connector.
// Result: ConnectorError 404, 400 for an unknown state.
type ConnectorTargetState struct {
	Name  string
	State ConnectorState
}

// RestartConnector raises the generation, so the task's agent stops it
// and starts it again. With OnlyFailed it does so only if the task's
// status of the current generation is FAILED (Connect's
// ?onlyFailed=true), decided here so that a task that came back since
// the caller looked is left running.
// Result: ConnectorGeneration (the new one, or the current one when
// nothing restarted); ConnectorError 404.
type RestartConnector struct {
	Name       string
	OnlyFailed bool
}

// ConnectorTaskStatus records what the task's agent says of the task
// of Generation: RUNNING, or FAILED with the error's Trace. Node is the
// agent's node id, Worker its Connect address (host:port), Connect's
// worker_id: a reader that places the connector on another agent now
// knows the status is about a task that moved.
// Result: ConnectorError 404 for no such connector, 409 when the
// generation is not the current one (nothing changes: the status is
// about a task that was stopped since), 400 for bounds.
type ConnectorTaskStatus struct {
	Name       string
	Generation uint64
	State      TaskState
	Node       int32
	Worker     string
	Trace      string
}

func (PutConnector) Type() CommandType         { return TypePutConnector }
func (PutConnector) version() uint16           { return 1 }
func (DeleteConnector) Type() CommandType      { return TypeDeleteConnector }
func (DeleteConnector) version() uint16        { return 1 }
func (ConnectorTargetState) Type() CommandType { return TypeConnectorTargetState }
func (ConnectorTargetState) version() uint16   { return 1 }
func (RestartConnector) Type() CommandType     { return TypeRestartConnector }
func (RestartConnector) version() uint16       { return 1 }
func (ConnectorTaskStatus) Type() CommandType  { return TypeConnectorTaskStatus }
func (ConnectorTaskStatus) version() uint16    { return 1 }

func (c PutConnector) appendPayload(b []byte) []byte {
	b = appendString(b, c.Name)
	b = appendStringMap(b, c.Config)
	b = appendString(b, c.Owner)
	return append(b, byte(c.Mode))
}

func decodePutConnectorV1(p []byte) (PutConnector, error) {
	r := &reader{b: p}
	c := PutConnector{Name: r.string(), Config: r.stringMap(), Owner: r.string(), Mode: PutMode(r.byte())}
	return c, r.done()
}

func (c DeleteConnector) appendPayload(b []byte) []byte { return appendString(b, c.Name) }

func decodeDeleteConnectorV1(p []byte) (DeleteConnector, error) {
	r := &reader{b: p}
	c := DeleteConnector{Name: r.string()}
	return c, r.done()
}

func (c ConnectorTargetState) appendPayload(b []byte) []byte {
	return append(appendString(b, c.Name), byte(c.State))
}

func decodeConnectorTargetStateV1(p []byte) (ConnectorTargetState, error) {
	r := &reader{b: p}
	c := ConnectorTargetState{Name: r.string(), State: ConnectorState(r.byte())}
	return c, r.done()
}

func (c RestartConnector) appendPayload(b []byte) []byte {
	return appendBool(appendString(b, c.Name), c.OnlyFailed)
}

func decodeRestartConnectorV1(p []byte) (RestartConnector, error) {
	r := &reader{b: p}
	c := RestartConnector{Name: r.string(), OnlyFailed: r.bool()}
	return c, r.done()
}

func (c ConnectorTaskStatus) appendPayload(b []byte) []byte {
	b = appendString(b, c.Name)
	b = appendUvarint(b, c.Generation)
	b = append(b, byte(c.State))
	b = appendVarint(b, int64(c.Node))
	b = appendString(b, c.Worker)
	return appendString(b, c.Trace)
}

func decodeConnectorTaskStatusV1(p []byte) (ConnectorTaskStatus, error) {
	r := &reader{b: p}
	c := ConnectorTaskStatus{Name: r.string(), Generation: r.uvarint(), State: TaskState(r.byte()), Node: r.int32(), Worker: r.string(), Trace: r.string()}
	return c, r.done()
}

// Connector is a connector as the metadata holds it.
type Connector struct {
	Name   string
	Config map[string]string
	Owner  string
	State  ConnectorState
	// Generation starts at 1 and rises with every restart and config
	// change.
	Generation uint64
	// Task is the task's last status; it is about the current
	// generation only if Task.Generation == Generation.
	Task ConnectorTask
}

// ConnectorTask is a task's status as its agent last wrote it.
type ConnectorTask struct {
	Generation uint64
	State      TaskState
	Node       int32
	Worker     string
	Trace      string
}

// TaskStatus is the task's status about the current generation:
// TaskUnassigned (and no worker) when its agent said nothing about it
// yet.
func (c Connector) TaskStatus() ConnectorTask {
	if c.Task.Generation != c.Generation {
		return ConnectorTask{Generation: c.Generation}
	}
	return c.Task
}

func connectorKey(name string) []byte { return append([]byte{prefixConnector}, name...) }

func encodeConnector(c Connector) []byte {
	b := []byte{recordV1}
	b = appendString(b, c.Name)
	b = appendStringMap(b, c.Config)
	b = appendString(b, c.Owner)
	b = append(b, byte(c.State))
	b = appendUvarint(b, c.Generation)
	b = appendUvarint(b, c.Task.Generation)
	b = append(b, byte(c.Task.State))
	b = appendVarint(b, int64(c.Task.Node))
	b = appendString(b, c.Task.Worker)
	return appendString(b, c.Task.Trace)
}

func decodeConnector(v []byte) (Connector, error) {
	r := recordReader(v)
	c := Connector{Name: r.string(), Config: r.stringMap(), Owner: r.string(), State: ConnectorState(r.byte()), Generation: r.uvarint()}
	c.Task = ConnectorTask{Generation: r.uvarint(), State: TaskState(r.byte()), Node: r.int32(), Worker: r.string(), Trace: r.string()}
	if err := r.done(); err != nil {
		return Connector{}, corrupt("connector", err)
	}
	return c, nil
}

func connectorByName(get func([]byte) ([]byte, bool, error), name string) (Connector, bool, error) {
	v, ok, err := get(connectorKey(name))
	if err != nil || !ok {
		return Connector{}, false, err
	}
	c, err := decodeConnector(v)
	return c, err == nil, err
}

func readConnectorCount(get func([]byte) ([]byte, bool, error)) (uint64, error) {
	v, ok, err := get(keyConnectorCounter)
	if err != nil || !ok {
		return 0, err
	}
	r := recordReader(v)
	n := r.uvarint()
	if err := r.done(); err != nil {
		return 0, corrupt("connector counter", err)
	}
	return n, nil
}

func (a *Applier) setConnectorCount(n uint64) error {
	return a.b.Set(keyConnectorCounter, appendUvarint([]byte{recordV1}, n))
}

// connectorFailed is a refusal with the HTTP status Connect answers.
func connectorFailed(status int32, format string, args ...any) Result {
	e := kerr.InvalidRequest
	switch status {
	case 404:
		e = kerr.ResourceNotFound
	case 409:
		e = kerr.InvalidRequest
	}
	r := failed(e, format, args...)
	r.ConnectorError = status
	return r
}

// ValidConnectorName says why name cannot be a connector's, "" if it
// can: Connect refuses an empty name and ISO control characters; Strand
// also a name that is not UTF-8, has a '/' (a path segment, a
// directory) or space around it, or is longer than 255 bytes.
func ValidConnectorName(name string) string {
	switch {
	case strings.TrimSpace(name) == "":
		return "Connector name is empty"
	case len(name) > MaxConnectorNameBytes:
		return "Connector name is longer than 255 bytes"
	case !utf8.ValidString(name):
		return "Connector name is not UTF-8"
	case strings.TrimSpace(name) != name:
		return "Connector name starts or ends with white space"
	case strings.ContainsRune(name, '/'), name == ".", name == "..":
		return "Connector name may not contain '/' or be '.' or '..'"
	case strings.ContainsFunc(name, unicode.IsControl):
		return "Connector name contains ISO control characters"
	}
	return ""
}

// checkConnectorConfig says why a config is refused, "" if it is not.
func checkConnectorConfig(m map[string]string) string {
	if len(m) > MaxConnectorConfigEntries {
		return "a connector's config has more than 512 entries"
	}
	total := 0
	for k, v := range m {
		switch {
		case k == "" || len(k) > MaxConnectorKeyBytes:
			return "a config key has 1 to 255 bytes"
		case len(v) > MaxConnectorValueBytes:
			return "config " + k + " is longer than 64 KiB"
		}
		total += len(k) + len(v)
	}
	if total > MaxConnectorConfigBytes {
		return "a connector's config is longer than 256 KiB"
	}
	return ""
}

func (a *Applier) putConnector(c PutConnector) (Result, error) {
	if msg := ValidConnectorName(c.Name); msg != "" {
		return connectorFailed(400, "%s", msg), nil
	}
	if msg := checkConnectorConfig(c.Config); msg != "" {
		return connectorFailed(400, "%s", msg), nil
	}
	switch {
	case len(c.Owner) > maxOwnerBytes:
		return connectorFailed(400, "owner principal longer than 1024 bytes"), nil
	case c.Mode > PutUpdate:
		return connectorFailed(400, "unknown put mode %d", c.Mode), nil
	}
	cur, exists, err := connectorByName(a.get, c.Name)
	if err != nil {
		return Result{}, err
	}
	switch {
	case exists && c.Mode == PutCreate:
		return connectorFailed(409, "Connector %s already exists", c.Name), nil
	case !exists && c.Mode == PutUpdate:
		return connectorFailed(404, "Connector %s not found", c.Name), nil
	case exists:
		if sameConfig(cur.Config, c.Config) {
			return Result{ConnectorGeneration: cur.Generation}, nil
		}
		cur.Config = c.Config
		cur.Generation++
		return Result{ConnectorGeneration: cur.Generation}, a.b.Set(connectorKey(c.Name), encodeConnector(cur))
	}
	n, err := readConnectorCount(a.get)
	if err != nil {
		return Result{}, err
	}
	if n >= MaxConnectors {
		return connectorFailed(409, "the cluster holds %d connectors, as many as it may", n), nil
	}
	conn := Connector{Name: c.Name, Config: c.Config, Owner: c.Owner, State: ConnectorRunning, Generation: 1}
	if err := a.b.Set(connectorKey(c.Name), encodeConnector(conn)); err != nil {
		return Result{}, err
	}
	return Result{ConnectorCreated: true, ConnectorGeneration: 1}, a.setConnectorCount(n + 1)
}

func sameConfig(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (a *Applier) deleteConnector(c DeleteConnector) (Result, error) {
	_, exists, err := connectorByName(a.get, c.Name)
	if err != nil {
		return Result{}, err
	}
	if !exists {
		return connectorFailed(404, "Connector %s not found", c.Name), nil
	}
	n, err := readConnectorCount(a.get)
	if err != nil {
		return Result{}, err
	}
	if n == 0 {
		return Result{}, corrupt("connector counter", errRange)
	}
	if err := a.b.Delete(connectorKey(c.Name)); err != nil {
		return Result{}, err
	}
	return Result{}, a.setConnectorCount(n - 1)
}

func (a *Applier) connectorTargetState(c ConnectorTargetState) (Result, error) {
	if c.State != ConnectorRunning && c.State != ConnectorPaused {
		return connectorFailed(400, "unknown target state %d", c.State), nil
	}
	cur, exists, err := connectorByName(a.get, c.Name)
	if err != nil {
		return Result{}, err
	}
	if !exists {
		return connectorFailed(404, "Connector %s not found", c.Name), nil
	}
	if cur.State == c.State {
		return Result{ConnectorGeneration: cur.Generation}, nil
	}
	cur.State = c.State
	return Result{ConnectorGeneration: cur.Generation}, a.b.Set(connectorKey(c.Name), encodeConnector(cur))
}

func (a *Applier) restartConnector(c RestartConnector) (Result, error) {
	cur, exists, err := connectorByName(a.get, c.Name)
	if err != nil {
		return Result{}, err
	}
	if !exists {
		return connectorFailed(404, "Connector %s not found", c.Name), nil
	}
	if c.OnlyFailed && cur.TaskStatus().State != TaskFailed {
		return Result{ConnectorGeneration: cur.Generation}, nil
	}
	cur.Generation++
	return Result{ConnectorGeneration: cur.Generation}, a.b.Set(connectorKey(c.Name), encodeConnector(cur))
}

func (a *Applier) connectorTaskStatus(c ConnectorTaskStatus) (Result, error) {
	switch {
	case c.State != TaskRunning && c.State != TaskFailed:
		return connectorFailed(400, "unknown task state %d", c.State), nil
	case len(c.Trace) > MaxConnectorTraceBytes:
		return connectorFailed(400, "a trace is longer than 8 KiB"), nil
	case len(c.Worker) > MaxConnectorWorkerBytes:
		return connectorFailed(400, "a worker id is longer than 1024 bytes"), nil
	}
	cur, exists, err := connectorByName(a.get, c.Name)
	if err != nil {
		return Result{}, err
	}
	if !exists {
		return connectorFailed(404, "Connector %s not found", c.Name), nil
	}
	if c.Generation != cur.Generation {
		return connectorFailed(409, "status of generation %d, the connector is at %d", c.Generation, cur.Generation), nil
	}
	cur.Task = ConnectorTask{Generation: c.Generation, State: c.State, Node: c.Node, Worker: c.Worker, Trace: c.Trace}
	return Result{ConnectorGeneration: cur.Generation}, a.b.Set(connectorKey(c.Name), encodeConnector(cur))
}

// Connector reads one connector.
func (v *View) Connector(name string) (Connector, bool, error) { return connectorByName(v.get, name) }

// Connectors reads every connector, sorted by name.
func (v *View) Connectors() ([]Connector, error) {
	it, err := v.r.NewIter([]byte{prefixConnector}, []byte{prefixConnector + 1})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []Connector
	for ok := it.First(); ok; ok = it.Next() {
		c, err := decodeConnector(it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, it.Error()
}
