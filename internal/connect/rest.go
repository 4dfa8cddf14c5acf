package connect

// Kafka Connect's REST API, as Connect 3.x serves it, over the
// connectors in the replicated metadata, so that existing configs,
// curl scripts and Connect tooling work unchanged against any agent:
//
//	GET    /                                        version, commit, kafka_cluster_id
//	GET    /connectors[?expand=status&expand=info]  names, or name -> {status, info}
//	POST   /connectors                              {"name", "config"}: 201, 409 if it exists
//	GET    /connectors/{name}                       {"name", "config", "tasks", "type"}
//	GET    /connectors/{name}/config                the config, secrets "[hidden]"
//	PUT    /connectors/{name}/config                create (201) or update (200)
//	GET    /connectors/{name}/status                connector and task states, worker ids
//	GET    /connectors/{name}/tasks                 [{"id": {"connector", "task"}, "config"}]
//	GET    /connectors/{name}/tasks/{id}/status     one task's state
//	PUT    /connectors/{name}/pause, /resume        202
//	POST   /connectors/{name}/restart               204; 202 and the status with
//	                                                ?includeTasks=true or ?onlyFailed=true
//	POST   /connectors/{name}/tasks/{id}/restart    204
//	DELETE /connectors/{name}                       204
//	GET    /connector-plugins                       [{"class", "type", "version"}]
//	PUT    /connector-plugins/{class}/config/validate   Connect's validation answer
//
// Errors are Connect's: {"error_code": <HTTP status>, "message": ...}.
//
// What differs from Connect, and why:
//   - One task per connector: tasks.max is accepted, and a value above 1
//     runs one task all the same (the classes keep order and exactly-once
//     by running alone). Task ids other than 0 are 404.
//   - Restart without includeTasks restarts the task too: the connector
//     and its task are one unit here.
//   - Validation reports the class's one error on connector.class, since
//     Class.Validate names no key.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/meta"
)

// Version is what GET / and the plugins list report: the Connect
// version whose API this imitates, with Strand's suffix.
const Version = "3.9.0-strand"

// maxBodyBytes bounds a request body: a config is at most 256 KiB in
// the metadata.
const maxBodyBytes = 1 << 20

// Error is a refusal as Connect answers it.
type Error struct {
	Status  int
	Message string
	// Err is the cause a front end other than HTTP may word its own
	// way: the class's error for an invalid config, ErrMaskedUnknown,
	// meta.ErrNotAtLevel. Often nil.
	Err error
}

func (e *Error) Error() string { return e.Message }

// Unwrap is Err.
func (e *Error) Unwrap() error { return e.Err }

func errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// APIConfig configures the REST API.
type APIConfig struct {
	Store   Store
	Classes *ClassSet
	Secrets *Secrets
	// Authorize decides whether the request's caller may do op on the
	// connector name (package acl's doc): nil, or the refusal. For
	// CREATE the agent asks the cluster, then the name.
	Authorize func(r *http.Request, op acl.Operation, name string) *Error
	// Principal names the caller, recorded as a new connector's owner.
	Principal func(r *http.Request) string
	// Placed is the agent placement gives the connector now: its node
	// id and worker_id (host:port of its Connect API). Nil: the status
	// is shown as the task's agent last wrote it.
	Placed func(name string) (node int32, worker string)
	// Commit is the build's revision, GET /'s commit.
	Commit string
}

// API serves the REST API.
type API struct {
	cfg APIConfig
	m   *Manager
	mux *http.ServeMux
}

// NewAPI returns the REST API's handler.
func NewAPI(cfg APIConfig) *API {
	if cfg.Authorize == nil {
		cfg.Authorize = func(*http.Request, acl.Operation, string) *Error { return nil }
	}
	if cfg.Principal == nil {
		cfg.Principal = func(*http.Request) string { return "" }
	}
	a := &API{cfg: cfg, mux: http.NewServeMux(),
		m: NewManager(ManagerConfig{Store: cfg.Store, Classes: cfg.Classes, Secrets: cfg.Secrets, Placed: cfg.Placed})}
	a.handle("GET /{$}", a.root)
	a.handle("GET /connectors", a.list)
	a.handle("POST /connectors", a.create)
	a.handle("GET /connectors/{name}", a.info)
	a.handle("DELETE /connectors/{name}", a.delete)
	a.handle("GET /connectors/{name}/config", a.getConfig)
	a.handle("PUT /connectors/{name}/config", a.putConfig)
	a.handle("GET /connectors/{name}/status", a.status)
	a.handle("GET /connectors/{name}/tasks", a.tasks)
	a.handle("GET /connectors/{name}/tasks/{id}/status", a.taskStatus)
	a.handle("PUT /connectors/{name}/pause", a.pause)
	a.handle("PUT /connectors/{name}/resume", a.resume)
	a.handle("POST /connectors/{name}/restart", a.restart)
	a.handle("POST /connectors/{name}/tasks/{id}/restart", a.restartTask)
	a.handle("GET /connector-plugins", a.plugins)
	a.handle("PUT /connector-plugins/{class}/config/validate", a.validate)
	// Anything else is Jersey's 404, in Connect's JSON.
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusNotFound, "HTTP 404 Not Found")
	})
	return a
}

// ServeHTTP serves r; an unknown path is Connect's 404.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Handler returns the route r matches (for metrics labels).
func (a *API) Handler(r *http.Request) (http.Handler, string) { return a.mux.Handler(r) }

func (a *API) handle(pattern string, h func(*http.Request) (int, any, *Error)) {
	a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		status, body, err := h(r)
		if err != nil {
			WriteError(w, err.Status, err.Message)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if body != nil {
			_ = json.NewEncoder(w).Encode(body)
		}
	})
}

// WriteError answers as Connect does.
func WriteError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error_code": status, "message": msg})
}

// ConnectorInfo is Connect's answer to GET /connectors/{name}.
type ConnectorInfo struct {
	Name   string            `json:"name"`
	Config map[string]string `json:"config"`
	Tasks  []TaskID          `json:"tasks"`
	Type   Kind              `json:"type"`
}

// TaskID names a task.
type TaskID struct {
	Connector string `json:"connector"`
	Task      int    `json:"task"`
}

// Status is Connect's answer to GET /connectors/{name}/status.
type Status struct {
	Name      string          `json:"name"`
	Connector ConnectorStatus `json:"connector"`
	Tasks     []TaskStatus    `json:"tasks"`
	Type      Kind            `json:"type"`
}

// ConnectorStatus is the connector's part of Status.
type ConnectorStatus struct {
	State    string `json:"state"`
	WorkerID string `json:"worker_id"`
	Trace    string `json:"trace,omitempty"`
}

// TaskStatus is one task's part of Status.
type TaskStatus struct {
	ID       int    `json:"id"`
	State    string `json:"state"`
	WorkerID string `json:"worker_id"`
	Trace    string `json:"trace,omitempty"`
}

func (a *API) root(*http.Request) (int, any, *Error) {
	v := a.cfg.Store.View()
	id, _ := v.ClusterID()
	v.Close()
	return http.StatusOK, map[string]string{"version": Version, "commit": a.cfg.Commit, "kafka_cluster_id": id}, nil
}

// caller is r's caller as the Manager asks it.
func (a *API) caller(r *http.Request) Caller {
	return Caller{Principal: a.cfg.Principal(r), Authorize: func(op acl.Operation, name string) *Error { return a.cfg.Authorize(r, op, name) },
		Filter: func(op acl.Operation, name string) *Error { return a.cfg.Authorize(Filtering(r), op, name) }}
}

// described reads {name} for a caller that needs op on it.
func (a *API) described(r *http.Request, op acl.Operation) (meta.Connector, *Error) {
	return a.m.Get(r.Context(), a.caller(r), op, r.PathValue("name"))
}

func kindOf(classes *ClassSet, c meta.Connector) Kind {
	if class, ok := classes.Lookup(c.Config["connector.class"]); ok {
		return class.Kind
	}
	return ""
}

func (a *API) infoOf(c meta.Connector) ConnectorInfo { return a.m.Info(c) }

func (a *API) statusOf(c meta.Connector) Status { return a.m.Status(c) }

// StatusOf is c's status as Connect reports it: PAUSED when paused,
// else RUNNING with the task's state about the current generation, as
// the agent placed for it (placed, if not nil) last said: UNASSIGNED,
// with the placed agent as the worker, until that agent reports, so a
// task whose agent died does not read RUNNING while it moves.
func StatusOf(c meta.Connector, classes *ClassSet, placed func(name string) (int32, string)) Status {
	ts := c.TaskStatus()
	if placed != nil {
		node, w := placed(c.Name)
		if ts.State == meta.TaskUnassigned || ts.Node != node {
			ts = meta.ConnectorTask{Generation: c.Generation, State: meta.TaskUnassigned, Node: node, Worker: w}
		}
	}
	w := ts.Worker
	state := meta.ConnectorRunning.String()
	task := TaskStatus{ID: 0, State: ts.State.String(), WorkerID: w, Trace: ts.Trace}
	if c.State == meta.ConnectorPaused {
		state, task.State, task.Trace = meta.ConnectorPaused.String(), meta.ConnectorPaused.String(), ""
	}
	return Status{Name: c.Name, Connector: ConnectorStatus{State: state, WorkerID: w}, Tasks: []TaskStatus{task}, Type: kindOf(classes, c)}
}

func (a *API) list(r *http.Request) (int, any, *Error) {
	q := r.URL.Query()
	var status, info bool
	for _, e := range q["expand"] {
		switch e {
		case "status":
			status = true
		case "info":
			info = true
		}
	}
	visible, e := a.m.Visible(a.caller(r))
	if e != nil {
		return 0, nil, e
	}
	if !status && !info {
		names := make([]string, 0, len(visible))
		for _, c := range visible {
			names = append(names, c.Name)
		}
		return http.StatusOK, names, nil
	}
	out := map[string]map[string]any{}
	for _, c := range visible {
		m := map[string]any{}
		if status {
			m["status"] = a.statusOf(c)
		}
		if info {
			m["info"] = a.infoOf(c)
		}
		out[c.Name] = m
	}
	return http.StatusOK, out, nil
}

// readJSON decodes r's body into dst.
func readJSON(r *http.Request, dst any) *Error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBodyBytes))
	if err := dec.Decode(dst); err != nil {
		return errorf(http.StatusBadRequest, "Request body is not valid JSON: %v", err)
	}
	return nil
}

// stringConfig turns a JSON object's values into the strings Connect
// keeps: numbers and booleans as their text, as Connect's Jackson
// accepts them.
func stringConfig(raw map[string]json.RawMessage) (map[string]string, *Error) {
	cfg := make(map[string]string, len(raw))
	for k, v := range raw {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			cfg[k] = s
			continue
		}
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return nil, errorf(http.StatusBadRequest, "config %s: %v", k, err)
		}
		switch x.(type) {
		case float64, bool:
			cfg[k] = string(v)
		case nil:
			return nil, errorf(http.StatusBadRequest, "config %s is null", k)
		default:
			return nil, errorf(http.StatusBadRequest, "config %s is not a string", k)
		}
	}
	return cfg, nil
}

func (a *API) create(r *http.Request) (int, any, *Error) {
	var body struct {
		Name   string                     `json:"name"`
		Config map[string]json.RawMessage `json:"config"`
	}
	if e := readJSON(r, &body); e != nil {
		return 0, nil, e
	}
	cfg, e := stringConfig(body.Config)
	if e != nil {
		return 0, nil, e
	}
	name := body.Name
	if name == "" {
		name = cfg["name"]
	}
	c, e := a.m.Create(r.Context(), a.caller(r), name, cfg)
	if e != nil {
		return 0, nil, e
	}
	return http.StatusCreated, a.infoOf(c), nil
}

func (a *API) putConfig(r *http.Request) (int, any, *Error) {
	name := r.PathValue("name")
	var raw map[string]json.RawMessage
	if e := readJSON(r, &raw); e != nil {
		return 0, nil, e
	}
	cfg, e := stringConfig(raw)
	if e != nil {
		return 0, nil, e
	}
	c, created, e := a.m.Configure(r.Context(), a.caller(r), name, cfg)
	if e != nil {
		return 0, nil, e
	}
	if created {
		return http.StatusCreated, a.infoOf(c), nil
	}
	return http.StatusOK, a.infoOf(c), nil
}

func keysOf(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func (a *API) info(r *http.Request) (int, any, *Error) {
	c, e := a.described(r, kmsg.ACLOperationDescribe)
	if e != nil {
		return 0, nil, e
	}
	return http.StatusOK, a.infoOf(c), nil
}

func (a *API) getConfig(r *http.Request) (int, any, *Error) {
	c, e := a.described(r, kmsg.ACLOperationDescribe)
	if e != nil {
		return 0, nil, e
	}
	return http.StatusOK, a.infoOf(c).Config, nil
}

func (a *API) status(r *http.Request) (int, any, *Error) {
	c, e := a.described(r, kmsg.ACLOperationDescribe)
	if e != nil {
		return 0, nil, e
	}
	return http.StatusOK, a.statusOf(c), nil
}

func (a *API) tasks(r *http.Request) (int, any, *Error) {
	c, e := a.described(r, kmsg.ACLOperationDescribe)
	if e != nil {
		return 0, nil, e
	}
	type taskInfo struct {
		ID     TaskID            `json:"id"`
		Config map[string]string `json:"config"`
	}
	return http.StatusOK, []taskInfo{{ID: TaskID{Connector: c.Name, Task: 0}, Config: a.infoOf(c).Config}}, nil
}

// taskID parses {id}: only task 0 exists.
func taskID(r *http.Request, name string) *Error {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id != 0 {
		return errorf(http.StatusNotFound, "Task %s-%s not found", name, r.PathValue("id"))
	}
	return nil
}

func (a *API) taskStatus(r *http.Request) (int, any, *Error) {
	c, e := a.described(r, kmsg.ACLOperationDescribe)
	if e != nil {
		return 0, nil, e
	}
	if e := taskID(r, c.Name); e != nil {
		return 0, nil, errorf(http.StatusNotFound, "No status found for task %s-%s", c.Name, r.PathValue("id"))
	}
	return http.StatusOK, a.statusOf(c).Tasks[0], nil
}

func (a *API) targetState(r *http.Request, s meta.ConnectorState) (int, any, *Error) {
	c, e := a.described(r, kmsg.ACLOperationAlter)
	if e != nil {
		return 0, nil, e
	}
	if _, e := a.m.propose(r.Context(), meta.ConnectorTargetState{Name: c.Name, State: s}); e != nil {
		return 0, nil, e
	}
	return http.StatusAccepted, nil, nil
}

func (a *API) pause(r *http.Request) (int, any, *Error) {
	return a.targetState(r, meta.ConnectorPaused)
}

func (a *API) resume(r *http.Request) (int, any, *Error) {
	return a.targetState(r, meta.ConnectorRunning)
}

func (a *API) restart(r *http.Request) (int, any, *Error) {
	c, e := a.described(r, kmsg.ACLOperationAlter)
	if e != nil {
		return 0, nil, e
	}
	q := r.URL.Query()
	includeTasks, onlyFailed := q.Get("includeTasks") == "true", q.Get("onlyFailed") == "true"
	if _, e := a.m.propose(r.Context(), meta.RestartConnector{Name: c.Name, OnlyFailed: onlyFailed}); e != nil {
		return 0, nil, e
	}
	if !includeTasks && !onlyFailed {
		return http.StatusNoContent, nil, nil
	}
	// Connect answers these with the status as the restart leaves it.
	c, e = a.m.Lookup(r.Context(), c.Name)
	if e != nil {
		return 0, nil, e
	}
	return http.StatusAccepted, a.statusOf(c), nil
}

func (a *API) restartTask(r *http.Request) (int, any, *Error) {
	c, e := a.described(r, kmsg.ACLOperationAlter)
	if e != nil {
		return 0, nil, e
	}
	if e := taskID(r, c.Name); e != nil {
		return 0, nil, e
	}
	if _, e := a.m.propose(r.Context(), meta.RestartConnector{Name: c.Name}); e != nil {
		return 0, nil, e
	}
	return http.StatusNoContent, nil, nil
}

func (a *API) delete(r *http.Request) (int, any, *Error) {
	if e := a.m.Delete(r.Context(), a.caller(r), r.PathValue("name")); e != nil {
		return 0, nil, e
	}
	return http.StatusNoContent, nil, nil
}

func (a *API) plugins(*http.Request) (int, any, *Error) {
	type plugin struct {
		Class   string `json:"class"`
		Type    Kind   `json:"type"`
		Version string `json:"version"`
	}
	out := []plugin{}
	for _, c := range a.cfg.Classes.List() {
		out = append(out, plugin{Class: c.Name, Type: c.Kind, Version: Version})
	}
	return http.StatusOK, out, nil
}

// validate answers Connect's ConfigInfos: one entry per key given, the
// class's error (if any) on connector.class.
func (a *API) validate(r *http.Request) (int, any, *Error) {
	className := r.PathValue("class")
	class, ok := a.cfg.Classes.Lookup(className)
	if !ok {
		return 0, nil, errorf(http.StatusNotFound, "Failed to find any class that implements Connector and which name matches %s", className)
	}
	var raw map[string]json.RawMessage
	if e := readJSON(r, &raw); e != nil {
		return 0, nil, e
	}
	cfg, e := stringConfig(raw)
	if e != nil {
		return 0, nil, e
	}
	if c, ok := cfg["connector.class"]; !ok {
		cfg["connector.class"] = class.Name
	} else if other, _ := a.cfg.Classes.Lookup(c); other.Name != class.Name {
		return 0, nil, errorf(http.StatusBadRequest, "Included connector type %s does not match request type %s", c, className)
	}
	errs := map[string][]string{}
	if err := class.Validate(cfg); err != nil {
		errs["connector.class"] = []string{err.Error()}
	}
	type definition struct {
		Name          string   `json:"name"`
		Type          string   `json:"type"`
		Required      bool     `json:"required"`
		DefaultValue  *string  `json:"default_value"`
		Importance    string   `json:"importance"`
		Documentation string   `json:"documentation"`
		Group         *string  `json:"group"`
		Width         string   `json:"width"`
		DisplayName   string   `json:"display_name"`
		Dependents    []string `json:"dependents"`
		Order         int      `json:"order"`
	}
	type value struct {
		Name              string   `json:"name"`
		Value             *string  `json:"value"`
		RecommendedValues []string `json:"recommended_values"`
		Errors            []string `json:"errors"`
		Visible           bool     `json:"visible"`
	}
	type entry struct {
		Definition definition `json:"definition"`
		Value      value      `json:"value"`
	}
	masked := Masked(class, cfg)
	configs := []entry{}
	for i, k := range keysOf(cfg) {
		typ := "STRING"
		if class.Secret(k) {
			typ = "PASSWORD"
		}
		v := masked[k]
		e := errs[k]
		if e == nil {
			e = []string{}
		}
		configs = append(configs, entry{
			Definition: definition{Name: k, Type: typ, Importance: "MEDIUM", Width: "NONE", DisplayName: k, Dependents: []string{}, Order: i},
			Value:      value{Name: k, Value: &v, RecommendedValues: []string{}, Errors: e, Visible: true},
		})
	}
	return http.StatusOK, map[string]any{"name": class.Name, "error_count": len(errs), "groups": []string{}, "configs": configs}, nil
}

// filteringKey marks a request whose authorization only filters a
// listing (Filtering).
type filteringKey struct{}

// Filtering marks r as asked only to filter a listing: the caller is
// not refused, it sees less, so APIConfig.Authorize should write no
// denial to the authorization log (IsFiltering).
func Filtering(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), filteringKey{}, true))
}

// IsFiltering reports whether r was marked by Filtering.
func IsFiltering(r *http.Request) bool {
	f, _ := r.Context().Value(filteringKey{}).(bool)
	return f
}
