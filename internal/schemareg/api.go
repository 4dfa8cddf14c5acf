package schemareg

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/strandkafka/strand/internal/meta"
)

// Op is what a request does to a subject (or, with subject "", to the
// registry), for authorization: reading needs READ, registering WRITE,
// deleting DELETE, config and mode changes ALTER.
type Op int

const (
	OpRead Op = iota
	OpWrite
	OpDelete
	OpAlter
)

// Authorize says whether the request's caller may do op on subject ("":
// the registry as a whole); a non-nil error is the refusal (its *Error
// if it is one, else 403). The agent authenticates the caller (HTTP
// basic auth against the SASL users, or a certificate) and asks its
// authorizer.
type Authorize func(r *http.Request, op Op, subject string) error

// ContentType is the media type Confluent's API answers with.
const ContentType = "application/vnd.schemaregistry.v1+json"

// maxBodyBytes bounds a request body: a schema and some JSON around it.
const maxBodyBytes = meta.MaxSchemaBytes + 64<<10

// Handler serves Confluent Schema Registry's REST API over reg: every
// request authorized by authz first.
func Handler(reg *Registry, authz Authorize) http.Handler {
	a := &api{reg: reg, authz: authz}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /subjects", a.subjects)
	mux.HandleFunc("GET /subjects/{subject}/versions", a.versions)
	mux.HandleFunc("GET /subjects/{subject}/versions/{version}", a.version)
	mux.HandleFunc("GET /subjects/{subject}/versions/{version}/schema", a.versionSchema)
	mux.HandleFunc("GET /subjects/{subject}/versions/{version}/referencedby", a.referencedBy)
	mux.HandleFunc("POST /subjects/{subject}/versions", a.register)
	mux.HandleFunc("POST /subjects/{subject}", a.lookup)
	mux.HandleFunc("DELETE /subjects/{subject}", a.deleteSubject)
	mux.HandleFunc("DELETE /subjects/{subject}/versions/{version}", a.deleteVersion)
	mux.HandleFunc("GET /schemas/ids/{id}", a.byID)
	mux.HandleFunc("GET /schemas/ids/{id}/schema", a.byIDSchema)
	mux.HandleFunc("GET /schemas/ids/{id}/versions", a.idVersions)
	mux.HandleFunc("GET /schemas/ids/{id}/subjects", a.idSubjects)
	mux.HandleFunc("GET /schemas/types", a.types)
	mux.HandleFunc("POST /compatibility/subjects/{subject}/versions/{version}", a.compatibility)
	mux.HandleFunc("POST /compatibility/subjects/{subject}/versions", a.compatibility)
	mux.HandleFunc("GET /config", a.getConfig)
	mux.HandleFunc("PUT /config", a.putConfig)
	mux.HandleFunc("DELETE /config", a.deleteConfig)
	mux.HandleFunc("GET /config/{subject}", a.getConfig)
	mux.HandleFunc("PUT /config/{subject}", a.putConfig)
	mux.HandleFunc("DELETE /config/{subject}", a.deleteConfig)
	mux.HandleFunc("GET /mode", a.getMode)
	mux.HandleFunc("PUT /mode", a.putMode)
	mux.HandleFunc("GET /mode/{subject}", a.getMode)
	mux.HandleFunc("PUT /mode/{subject}", a.putMode)
	mux.HandleFunc("DELETE /mode", a.deleteMode)
	mux.HandleFunc("DELETE /mode/{subject}", a.deleteMode)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { a.reply(w, map[string]any{}) })
	// Anything else is answered in JSON, as Confluent's server does, so
	// a client decodes the refusal like any other.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.fail(w, newError(http.StatusNotFound, http.StatusNotFound, "HTTP 404 Not Found"))
	})
	return mux
}

type api struct {
	reg   *Registry
	authz Authorize
}

func (a *api) reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", ContentType)
	_ = json.NewEncoder(w).Encode(v)
}

// fail answers err as Confluent does: its code and message, or 500.
func (a *api) fail(w http.ResponseWriter, err error) {
	e, ok := IsRegistryError(err)
	if !ok {
		e = &Error{Status: http.StatusInternalServerError, Code: 50001, Message: err.Error()}
	}
	w.Header().Set("Content-Type", ContentType)
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error_code": e.Code, "message": e.Message})
}

// allowed authorizes the request, answering the refusal itself.
func (a *api) allowed(w http.ResponseWriter, r *http.Request, op Op, subject string) bool {
	return a.permitted(w, a.authz(r, op, subject))
}

// permitted answers an authorization's refusal (403 unless it is an
// *Error) and reports whether there was none.
func (a *api) permitted(w http.ResponseWriter, err error) bool {
	if err == nil {
		return true
	}
	if _, ok := IsRegistryError(err); !ok {
		err = &Error{Status: http.StatusForbidden, Code: 40301, Message: err.Error()}
	}
	a.fail(w, err)
	return false
}

func flag(r *http.Request, name string) bool {
	v, _ := strconv.ParseBool(r.URL.Query().Get(name))
	return v
}

// deletedFilter reads deleted and deletedOnly: which of live and
// deleted things a list shows (deletedOnly wins, as Confluent's).
func deletedFilter(r *http.Request) func(deleted bool) bool {
	switch {
	case flag(r, "deletedOnly"):
		return func(deleted bool) bool { return deleted }
	case flag(r, "deleted"):
		return func(bool) bool { return true }
	}
	return func(deleted bool) bool { return !deleted }
}

// versionParam reads {version}: a positive number, or "latest" (-1).
func versionParam(r *http.Request) (int32, error) {
	s := r.PathValue("version")
	if s == "latest" || s == "-1" {
		return -1, nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n <= 0 {
		return 0, newError(http.StatusUnprocessableEntity, meta.SchemaErrInvalidVersion,
			"The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", s)
	}
	return int32(n), nil
}

// decode reads a JSON body into v.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return err
	}
	if len(body) > maxBodyBytes {
		return newError(http.StatusRequestEntityTooLarge, 41301, "request body over %d bytes", maxBodyBytes)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return newError(http.StatusUnprocessableEntity, 42201, "Invalid JSON body: %v", err)
	}
	return nil
}

func (a *api) subjects(w http.ResponseWriter, r *http.Request) {
	if !a.allowed(w, r, OpRead, "") {
		return
	}
	v := a.reg.md.View()
	subjects, live, err := v.SchemaSubjects()
	v.Close()
	if err != nil {
		a.fail(w, err)
		return
	}
	want := deletedFilter(r)
	prefix := r.URL.Query().Get("subjectPrefix")
	out := []string{}
	for i, s := range subjects {
		// A subject is deleted when none of its versions is live.
		if want(!live[i]) && strings.HasPrefix(s, prefix) && a.authz(Filtering(r), OpRead, s) == nil {
			out = append(out, s)
		}
	}
	a.reply(w, out)
}

func (a *api) versions(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	if !a.allowed(w, r, OpRead, subject) {
		return
	}
	v := a.reg.md.View()
	vs, err := v.SchemaVersions(subject)
	v.Close()
	if err != nil {
		a.fail(w, err)
		return
	}
	want := deletedFilter(r)
	out := []int32{}
	for _, sv := range vs {
		if want(sv.Deleted) {
			out = append(out, sv.Version)
		}
	}
	if len(out) == 0 {
		a.fail(w, newError(http.StatusNotFound, meta.SchemaErrSubjectNotFound, "Subject '%s' not found.", subject))
		return
	}
	a.reply(w, out)
}

// fresh runs read; if it finds nothing, it catches the agent up with
// the log and runs it once more, so what another agent registered
// before this request is found here too (read-your-writes across
// agents, the read path staying local when it hits).
func (a *api) fresh(r *http.Request, read func() error) error {
	err := read()
	if !notFound(err) {
		return err
	}
	if serr := a.reg.Sync(r.Context()); serr != nil {
		return err
	}
	return read()
}

func (a *api) getVersion(w http.ResponseWriter, r *http.Request) (Registered, bool) {
	subject := r.PathValue("subject")
	if !a.allowed(w, r, OpRead, subject) {
		return Registered{}, false
	}
	n, err := versionParam(r)
	if err == nil {
		var reg Registered
		err = a.fresh(r, func() (err error) {
			reg, err = a.reg.Version(subject, n, flag(r, "deleted"))
			return err
		})
		if err == nil {
			return reg, true
		}
	}
	a.fail(w, err)
	return Registered{}, false
}

func (a *api) version(w http.ResponseWriter, r *http.Request) {
	if reg, ok := a.getVersion(w, r); ok {
		a.reply(w, reg)
	}
}

func (a *api) versionSchema(w http.ResponseWriter, r *http.Request) {
	if reg, ok := a.getVersion(w, r); ok {
		w.Header().Set("Content-Type", ContentType)
		_, _ = io.WriteString(w, reg.Schema)
	}
}

func (a *api) register(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	if !a.allowed(w, r, OpWrite, subject) {
		return
	}
	var req RegisterRequest
	if err := decode(r, &req); err != nil {
		a.fail(w, err)
		return
	}
	req.Force = flag(r, "force")
	id, err := a.reg.Register(r.Context(), subject, req, flag(r, "normalize"))
	if err != nil {
		a.fail(w, err)
		return
	}
	a.reply(w, map[string]int32{"id": id})
}

// lookup is POST /subjects/{subject}: the version of subject holding
// the schema, if one does.
func (a *api) lookup(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	if !a.allowed(w, r, OpRead, subject) {
		return
	}
	var req RegisterRequest
	if err := decode(r, &req); err != nil {
		a.fail(w, err)
		return
	}
	var reg Registered
	err := a.fresh(r, func() (err error) {
		reg, err = a.reg.Lookup(subject, req, flag(r, "normalize"), flag(r, "deleted"))
		return err
	})
	if err != nil {
		a.fail(w, err)
		return
	}
	a.reply(w, reg)
}

func (a *api) deleteSubject(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	if !a.allowed(w, r, OpDelete, subject) {
		return
	}
	vs, err := a.reg.Delete(r.Context(), subject, 0, flag(r, "permanent"))
	if err != nil {
		a.fail(w, err)
		return
	}
	a.reply(w, vs)
}

func (a *api) deleteVersion(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	if !a.allowed(w, r, OpDelete, subject) {
		return
	}
	n, err := versionParam(r)
	if err == nil && n == -1 {
		var reg Registered
		if reg, err = a.reg.Version(subject, -1, false); err == nil {
			n = reg.Version
		}
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	vs, err := a.reg.Delete(r.Context(), subject, n, flag(r, "permanent"))
	if err != nil {
		a.fail(w, err)
		return
	}
	a.reply(w, vs[0])
}

// idParam reads {id}: a positive number.
func idParam(r *http.Request) (int32, error) {
	n, err := strconv.ParseInt(r.PathValue("id"), 10, 32)
	if err != nil || n <= 0 {
		return 0, newError(http.StatusNotFound, 40403, "Schema %s not found", r.PathValue("id"))
	}
	return int32(n), nil
}

// schemaByID is GET /schemas/ids/{id}'s body.
type schemaByID struct {
	Schema     string      `json:"schema"`
	SchemaType Type        `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
	MaxID      int32       `json:"maxId,omitempty"`
}

func (a *api) getByID(w http.ResponseWriter, r *http.Request) (meta.StoredSchema, bool) {
	if !a.allowed(w, r, OpRead, "") {
		return meta.StoredSchema{}, false
	}
	id, err := idParam(r)
	var st meta.StoredSchema
	if err == nil {
		err = a.fresh(r, func() (err error) {
			st, err = a.reg.ByID(id)
			return err
		})
	}
	if err != nil {
		a.fail(w, err)
		return meta.StoredSchema{}, false
	}
	return st, a.permitted(w, a.readableByID(r, id))
}

// readableByID authorizes reading schema id: Confluent's deserializers
// look ids up without naming a subject, so a caller may read it if it
// may READ some subject holding it, soft-deleted versions included
// (records written with them are still read). An id no subject holds
// any more is for those who may ALTER the registry.
func (a *api) readableByID(r *http.Request, id int32) error {
	svs, err := a.reg.VersionsOf(id, true)
	if err != nil {
		return &Error{Status: http.StatusInternalServerError, Code: 50001, Message: err.Error()}
	}
	if len(svs) == 0 {
		return a.authz(r, OpAlter, "")
	}
	for _, sv := range svs {
		if err = a.authz(Filtering(r), OpRead, sv.Subject); err == nil {
			return nil
		}
	}
	return err
}

func (a *api) byID(w http.ResponseWriter, r *http.Request) {
	st, ok := a.getByID(w, r)
	if !ok {
		return
	}
	out := schemaByID{Schema: st.Schema, References: schemaRefs(st.References)}
	if t := Type(st.SchemaType); t != TypeAvro {
		out.SchemaType = t
	}
	if flag(r, "fetchMaxId") {
		var err error
		if out.MaxID, err = a.reg.MaxID(); err != nil {
			a.fail(w, err)
			return
		}
	}
	a.reply(w, out)
}

func (a *api) byIDSchema(w http.ResponseWriter, r *http.Request) {
	if st, ok := a.getByID(w, r); ok {
		w.Header().Set("Content-Type", ContentType)
		_, _ = io.WriteString(w, st.Schema)
	}
}

func (a *api) idVersions(w http.ResponseWriter, r *http.Request) {
	if _, ok := a.getByID(w, r); !ok {
		return
	}
	id, _ := idParam(r)
	out, err := a.reg.VersionsOf(id, flag(r, "deleted"))
	if err != nil {
		a.fail(w, err)
		return
	}
	visible := out[:0]
	for _, sv := range out {
		if a.authz(Filtering(r), OpRead, sv.Subject) == nil {
			visible = append(visible, sv)
		}
	}
	a.reply(w, visible)
}

// idSubjects is GET /schemas/ids/{id}/subjects: the subjects with a
// version naming the schema.
func (a *api) idSubjects(w http.ResponseWriter, r *http.Request) {
	if _, ok := a.getByID(w, r); !ok {
		return
	}
	id, _ := idParam(r)
	vs, err := a.reg.VersionsOf(id, flag(r, "deleted"))
	if err != nil {
		a.fail(w, err)
		return
	}
	out := []string{}
	for _, sv := range vs {
		if !slices.Contains(out, sv.Subject) && a.authz(Filtering(r), OpRead, sv.Subject) == nil {
			out = append(out, sv.Subject)
		}
	}
	a.reply(w, out)
}

// referencedBy is GET /subjects/{subject}/versions/{version}/referencedby:
// the ids of schemas that reference the version.
func (a *api) referencedBy(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	if !a.allowed(w, r, OpRead, subject) {
		return
	}
	n, err := versionParam(r)
	var ids []int32
	if err == nil {
		ids, err = a.reg.ReferencedBy(subject, n, flag(r, "deleted"))
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	a.reply(w, ids)
}

func (a *api) types(w http.ResponseWriter, r *http.Request) {
	if !a.allowed(w, r, OpRead, "") {
		return
	}
	var out []string
	for t := range a.reg.formats {
		out = append(out, string(t))
	}
	slices.Sort(out)
	a.reply(w, out)
}

func (a *api) compatibility(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	if !a.allowed(w, r, OpRead, subject) {
		return
	}
	var n int32 // no {version}: every version the level names
	if r.PathValue("version") != "" {
		var err error
		if n, err = versionParam(r); err != nil {
			a.fail(w, err)
			return
		}
	}
	var req RegisterRequest
	if err := decode(r, &req); err != nil {
		a.fail(w, err)
		return
	}
	verbose := flag(r, "verbose")
	msgs, err := a.reg.Compatible(subject, n, req, flag(r, "normalize"))
	if e, ok := IsRegistryError(err); ok && e.Code == meta.SchemaErrInvalidSchema && verbose {
		// Verbose, Confluent answers a schema that does not parse as
		// incompatible, with the reason.
		msgs, err = []string{e.Message}, nil
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	out := map[string]any{"is_compatible": len(msgs) == 0}
	if verbose {
		out["messages"] = append([]string{}, msgs...)
	}
	a.reply(w, out)
}

// subjectOrGlobal is the {subject} of a config or mode path, "" for the
// global one.
func subjectOrGlobal(r *http.Request) (string, bool) {
	s := r.PathValue("subject")
	return s, s == ""
}

func (a *api) getConfig(w http.ResponseWriter, r *http.Request) {
	subject, global := subjectOrGlobal(r)
	if !a.allowed(w, r, OpRead, subject) {
		return
	}
	level, err := a.reg.ConfigOf(subject, global, flag(r, "defaultToGlobal"))
	if err != nil {
		a.fail(w, err)
		return
	}
	a.reply(w, map[string]string{"compatibilityLevel": string(level)})
}

func (a *api) putConfig(w http.ResponseWriter, r *http.Request) {
	subject, global := subjectOrGlobal(r)
	if !a.allowed(w, r, OpAlter, subject) {
		return
	}
	var req struct {
		Compatibility string `json:"compatibility"`
	}
	if err := decode(r, &req); err != nil {
		a.fail(w, err)
		return
	}
	level, err := ParseLevel(req.Compatibility)
	if err != nil {
		a.fail(w, newError(http.StatusUnprocessableEntity, meta.SchemaErrInvalidCompatibility, "%v", err))
		return
	}
	if _, err := a.reg.propose(r.Context(), meta.SchemaConfig{Subject: subject, Global: global, Compatibility: string(level)}); err != nil {
		a.fail(w, err)
		return
	}
	a.reply(w, map[string]string{"compatibility": string(level)})
}

// deleteConfig is DELETE /config/{subject}, answering the level it
// deleted (40401 when the subject has none, as Confluent's), and
// DELETE /config, which puts the global level back to the default.
func (a *api) deleteConfig(w http.ResponseWriter, r *http.Request) {
	subject, global := subjectOrGlobal(r)
	if !a.allowed(w, r, OpAlter, subject) {
		return
	}
	level, err := a.reg.ConfigOf(subject, global, false)
	if e, ok := IsRegistryError(err); ok && e.Code == meta.SchemaErrCompatNotConfigured {
		err = newError(http.StatusNotFound, meta.SchemaErrSubjectNotFound, "Subject '%s' not found.", subject)
	}
	if err == nil {
		_, err = a.reg.propose(r.Context(), meta.SchemaConfig{Subject: subject, Global: global, DeleteCompat: true})
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	a.reply(w, map[string]string{"compatibilityLevel": string(level)})
}

func (a *api) getMode(w http.ResponseWriter, r *http.Request) {
	subject, global := subjectOrGlobal(r)
	if !a.allowed(w, r, OpRead, subject) {
		return
	}
	mode, err := a.reg.ModeOf(subject, global, flag(r, "defaultToGlobal"))
	if err != nil {
		a.fail(w, err)
		return
	}
	a.reply(w, map[string]string{"mode": mode})
}

// deleteMode is DELETE /mode/{subject}, answering the mode it deleted
// (40401 when the subject has none, as Confluent's), and DELETE /mode,
// which puts the global mode back to READWRITE.
func (a *api) deleteMode(w http.ResponseWriter, r *http.Request) {
	subject, global := subjectOrGlobal(r)
	if !a.allowed(w, r, OpAlter, subject) {
		return
	}
	mode, err := a.reg.ModeOf(subject, global, false)
	if e, ok := IsRegistryError(err); ok && e.Code == meta.SchemaErrModeNotConfigured {
		err = newError(http.StatusNotFound, meta.SchemaErrSubjectNotFound, "Subject '%s' not found.", subject)
	}
	if err == nil {
		_, err = a.reg.propose(r.Context(), meta.SchemaConfig{Subject: subject, Global: global, DeleteMode: true})
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	a.reply(w, map[string]string{"mode": mode})
}

func (a *api) putMode(w http.ResponseWriter, r *http.Request) {
	subject, global := subjectOrGlobal(r)
	if !a.allowed(w, r, OpAlter, subject) {
		return
	}
	var req struct {
		Mode string `json:"mode"`
	}
	if err := decode(r, &req); err != nil {
		a.fail(w, err)
		return
	}
	mode := strings.ToUpper(req.Mode)
	if _, err := a.reg.propose(r.Context(), meta.SchemaConfig{Subject: subject, Global: global, Mode: mode, Force: flag(r, "force")}); err != nil {
		a.fail(w, err)
		return
	}
	a.reply(w, map[string]string{"mode": mode})
}

// filteringKey marks a request whose authorization only filters what an
// answer lists (Filtering).
type filteringKey struct{}

// Filtering marks r as asked only to filter what an answer lists (the
// subjects the caller may read): the caller is not refused, it sees
// less, so Authorize should write no denial to the authorization log
// (IsFiltering).
func Filtering(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), filteringKey{}, true))
}

// IsFiltering reports whether r was marked by Filtering.
func IsFiltering(r *http.Request) bool {
	f, _ := r.Context().Value(filteringKey{}).(bool)
	return f
}
