package schemareg

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/strandkafka/strand/internal/meta"
)

// Metadata is what the registry reads and writes: an agent's copy of
// the metadata (replica.Replica; metatest.DB in tests).
type Metadata interface {
	View() *meta.View
	Propose(ctx context.Context, c meta.Command) (meta.Result, error)
}

// Error is a refusal as Confluent's API gives it: an HTTP status, an
// error code (40401, 42201, ...) and a message.
type Error struct {
	Status  int
	Code    int32
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("schema registry %d: %s", e.Code, e.Message) }

func newError(status int, code int32, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// statusOf is the HTTP status of one of Confluent's error codes: the
// first three digits, but 409 itself and 50xxx as 500.
func statusOf(code int32) int {
	switch {
	case code < 1000:
		return int(code)
	case code >= 50000:
		return http.StatusInternalServerError
	}
	return int(code / 100)
}

// Registry is the schema registry's operations over the metadata:
// reads from the local copy, writes proposed through the log. The REST
// API (api.go) is a thin layer over it.
type Registry struct {
	md      Metadata
	formats map[Type]Format
}

// New returns a registry over md with the given formats.
func New(md Metadata, formats ...Format) *Registry {
	r := &Registry{md: md, formats: map[Type]Format{}}
	for _, f := range formats {
		r.formats[f.Type()] = f
	}
	return r
}

// RegisterRequest is POST /subjects/{subject}/versions's body.
type RegisterRequest struct {
	Schema     string      `json:"schema"`
	SchemaType Type        `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
	// ID imports a schema (IMPORT mode), as Version (0: the next one).
	// Outside IMPORT a Version must be the next one.
	ID      int32 `json:"id,omitempty"`
	Version int32 `json:"version,omitempty"`
	// Force registers without checking compatibility (the query's
	// force=true).
	Force bool `json:"-"`
}

// maxRegisterAttempts bounds how often Register checks again after
// another agent registered under the subject first.
const maxRegisterAttempts = 8

// Register registers a schema under subject and returns its id: the
// existing one if the subject holds the schema already. The schema is
// checked against the subject's versions at its compatibility level
// first (409 with the reasons), then proposed with the version it was
// checked against, and checked again if another registration won.
func (r *Registry) Register(ctx context.Context, subject string, req RegisterRequest, normalize bool) (int32, error) {
	f, err := r.format(req.SchemaType)
	if err != nil {
		return 0, err
	}
	for range maxRegisterAttempts {
		id, moved, err := r.registerOnce(ctx, f, subject, req, normalize)
		if !moved {
			return id, err
		}
	}
	return 0, newError(http.StatusInternalServerError, meta.SchemaErrSubjectMovedSinceCheck,
		"subject %q kept changing while this schema was checked", subject)
}

func (r *Registry) registerOnce(ctx context.Context, f Format, subject string, req RegisterRequest, normalize bool) (id int32, moved bool, err error) {
	text, latest, err := r.checked(f, subject, req, normalize)
	if err != nil {
		return 0, false, err
	}
	version := req.Version
	if req.ID == 0 {
		version = 0 // checked: the next one
	}
	res, err := r.propose(ctx, meta.RegisterSchema{Subject: subject, SchemaType: string(f.Type()), Schema: text,
		References: metaRefs(req.References), Expect: latest, ID: req.ID, Version: version})
	if e, ok := IsRegistryError(err); ok && e.Code == meta.SchemaErrSubjectMovedSinceCheck {
		return 0, true, nil
	}
	return res.SchemaID, false, err
}

// checked parses a registration and checks it against subject's live
// versions at the subject's level (an import is not checked), as of
// one view: it returns the text to store and the latest live version
// it was checked against.
func (r *Registry) checked(f Format, subject string, req RegisterRequest, normalize bool) (string, int32, error) {
	v := r.md.View()
	defer v.Close()
	s, err := parseRequest(v, f, req)
	if err != nil {
		return "", 0, err
	}
	versions, err := v.SchemaVersions(subject)
	if err != nil {
		return "", 0, err
	}
	var latest, highest int32
	var live []Schema
	var liveVersions []int32
	for _, sv := range versions {
		highest = sv.Version
		if sv.Deleted {
			continue
		}
		latest = sv.Version
		old, err := r.parseStored(v, sv.ID)
		if err != nil {
			return "", 0, err
		}
		live = append(live, old)
		liveVersions = append(liveVersions, sv.Version)
	}
	if req.ID == 0 && req.Version != 0 && req.Version != highest+1 {
		return "", 0, newError(http.StatusUnprocessableEntity, meta.SchemaErrInvalidSchema,
			"Version is not one more than previous version: %d after %d", req.Version, highest)
	}
	level, err := r.levelOf(v, subject)
	if err != nil {
		return "", 0, err
	}
	mode, err := modeOf(v, subject)
	if err != nil {
		return "", 0, err
	}
	// Only READWRITE registers after a check; in other modes the log
	// refuses the registration (READONLY, IMPORT without an id), or
	// imports it unchecked.
	if req.ID == 0 && !req.Force && mode == "READWRITE" {
		if msgs := checkMessages(f, level, s, live, liveVersions); len(msgs) > 0 {
			return "", 0, newError(http.StatusConflict, meta.SchemaErrIncompatible,
				"Schema being registered is incompatible with an earlier schema for subject %q, details: [%s]", subject, strings.Join(msgs, ", "))
		}
	}
	return s.Canonical(normalize), latest, nil
}

// checkMessages is Check's answer as Confluent words it: the reasons,
// then the level they were found at (nil: compatible).
func checkMessages(f Format, level Level, s Schema, existing []Schema, versions []int32) []string {
	msgs := check(f, level, s, existing, versions)
	if len(msgs) == 0 {
		return nil
	}
	return append(msgs, fmt.Sprintf("{validateFields: 'false', compatibility: '%s'}", level))
}

// parseRequest parses a request's schema with its references as v
// holds them (42201 if it does not parse).
func parseRequest(v *meta.View, f Format, req RegisterRequest) (Schema, error) {
	resolved, err := resolve(v, req.References)
	if err != nil {
		return nil, err
	}
	s, err := f.Parse(req.Schema, resolved)
	if err != nil {
		return nil, newError(http.StatusUnprocessableEntity, meta.SchemaErrInvalidSchema, "Invalid schema %s", err)
	}
	return s, nil
}

// propose proposes a schema command, turning a refusal into its Error.
// A log below metadata level 6 (agents of older builds may still read
// it) cannot take the registry's commands at all: nothing is written,
// and the caller is told what to raise.
func (r *Registry) propose(ctx context.Context, c meta.Command) (meta.Result, error) {
	res, err := r.md.Propose(ctx, c)
	switch {
	case errors.Is(err, meta.ErrNotAtLevel):
		return meta.Result{}, newError(http.StatusInternalServerError, 50001,
			"the schema registry needs %s %d or higher: raise it (strand features upgrade --feature %s=%d) once every agent runs a build that supports it",
			meta.FeatureMetadata, meta.MetadataLevel6, meta.FeatureMetadata, meta.MetadataLevel6)
	case err != nil:
		return meta.Result{}, err
	case res.SchemaError != 0:
		return meta.Result{}, newError(statusOf(res.SchemaError), res.SchemaError, "%s", res.Message)
	}
	return res, res.Err()
}

// format is the format of type t ("" is AVRO).
func (r *Registry) format(t Type) (Format, error) {
	if t == "" {
		t = TypeAvro
	}
	f, ok := r.formats[t]
	if !ok {
		return nil, newError(http.StatusUnprocessableEntity, meta.SchemaErrInvalidSchema, "Invalid schema type %s", t)
	}
	return f, nil
}

// levelOf is subject's compatibility level: its own, the global one,
// or the default.
func (r *Registry) levelOf(v *meta.View, subject string) (Level, error) {
	for _, global := range []bool{false, true} {
		c, err := v.SchemaConfigOf(subject, global)
		if err != nil {
			return "", err
		}
		if c.Compatibility != "" {
			return Level(c.Compatibility), nil
		}
	}
	return DefaultLevel, nil
}

// modeOf is the mode in force for subject: its own, the global one,
// or READWRITE.
func modeOf(v *meta.View, subject string) (string, error) {
	for _, global := range []bool{false, true} {
		c, err := v.SchemaConfigOf(subject, global)
		if err != nil {
			return "", err
		}
		if c.Mode != "" {
			return c.Mode, nil
		}
	}
	return "READWRITE", nil
}

// parseStored parses the schema stored under id, with its references.
func (r *Registry) parseStored(v *meta.View, id int32) (Schema, error) {
	st, ok, err := v.SchemaByID(id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("schemareg: a version names schema %d, which is not stored", id)
	}
	f, err := r.format(Type(st.SchemaType))
	if err != nil {
		return nil, err
	}
	resolved, err := resolve(v, schemaRefs(st.References))
	if err != nil {
		return nil, err
	}
	return f.Parse(st.Schema, resolved)
}

// maxReferenceDepth bounds how deep references are followed: the log
// refuses references to what does not exist, so a cycle cannot be
// registered, but a chain can be long.
const maxReferenceDepth = 32

// resolve reads the schemas refs name, and theirs, by reference name.
func resolve(v *meta.View, refs []Reference) (Resolved, error) {
	out := Resolved{}
	var walk func(refs []Reference, depth int) error
	walk = func(refs []Reference, depth int) error {
		if depth > maxReferenceDepth {
			return newError(http.StatusUnprocessableEntity, meta.SchemaErrInvalidSchema, "references nested deeper than %d", maxReferenceDepth)
		}
		for _, ref := range refs {
			if _, done := out[ref.Name]; done {
				continue
			}
			sv, err := versionOf(v, ref.Subject, int32(ref.Version), false)
			if err != nil {
				return newError(http.StatusUnprocessableEntity, meta.SchemaErrInvalidSchema, "Invalid schema reference %q: %v", ref.Name, err)
			}
			st, ok, err := v.SchemaByID(sv.ID)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("schemareg: reference %q names schema %d, which is not stored", ref.Name, sv.ID)
			}
			out[ref.Name] = st.Schema
			if err := walk(schemaRefs(st.References), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(refs, 0)
}

// versionOf finds subject's version (-1: the latest live), with
// deleted ones only if asked.
func versionOf(v *meta.View, subject string, version int32, deleted bool) (meta.SchemaVersion, error) {
	vs, err := v.SchemaVersions(subject)
	if err != nil {
		return meta.SchemaVersion{}, err
	}
	var live []meta.SchemaVersion
	for _, sv := range vs {
		if deleted || !sv.Deleted {
			live = append(live, sv)
		}
	}
	if len(live) == 0 {
		return meta.SchemaVersion{}, newError(http.StatusNotFound, meta.SchemaErrSubjectNotFound, "Subject '%s' not found.", subject)
	}
	if version == -1 {
		return live[len(live)-1], nil
	}
	for _, sv := range live {
		if sv.Version == version {
			return sv, nil
		}
	}
	return meta.SchemaVersion{}, newError(http.StatusNotFound, meta.SchemaErrVersionNotFound, "Version %d not found.", version)
}

func metaRefs(refs []Reference) []meta.SchemaReference {
	var out []meta.SchemaReference
	for _, r := range refs {
		out = append(out, meta.SchemaReference{Name: r.Name, Subject: r.Subject, Version: int32(r.Version)})
	}
	return out
}

func schemaRefs(refs []meta.SchemaReference) []Reference {
	var out []Reference
	for _, r := range refs {
		out = append(out, Reference{Name: r.Name, Subject: r.Subject, Version: int(r.Version)})
	}
	return out
}

// Registered is a subject's version as GET /subjects/{s}/versions/{v}
// returns it.
type Registered struct {
	Subject    string      `json:"subject"`
	Version    int32       `json:"version"`
	ID         int32       `json:"id"`
	SchemaType Type        `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
}

// Version returns subject's version (-1: the latest), deleted ones too
// when asked.
func (r *Registry) Version(subject string, version int32, deleted bool) (Registered, error) {
	v := r.md.View()
	defer v.Close()
	sv, err := versionOf(v, subject, version, deleted)
	if err != nil {
		return Registered{}, err
	}
	st, ok, err := v.SchemaByID(sv.ID)
	if err != nil {
		return Registered{}, err
	}
	if !ok {
		return Registered{}, fmt.Errorf("schemareg: version %d of %q names schema %d, which is not stored", sv.Version, subject, sv.ID)
	}
	reg := Registered{Subject: subject, Version: sv.Version, ID: sv.ID, Schema: st.Schema, References: schemaRefs(st.References)}
	if t := Type(st.SchemaType); t != TypeAvro {
		reg.SchemaType = t // Confluent leaves AVRO out
	}
	return reg, nil
}

// ByID returns the schema registered with id (40403 if none).
func (r *Registry) ByID(id int32) (meta.StoredSchema, error) {
	v := r.md.View()
	defer v.Close()
	st, ok, err := v.SchemaByID(id)
	if err != nil {
		return meta.StoredSchema{}, err
	}
	if !ok {
		return meta.StoredSchema{}, newError(http.StatusNotFound, 40403, "Schema %d not found", id)
	}
	return st, nil
}

// syncer is a Metadata that can catch up with the log's tail (the
// agent's replica); a read after Sync sees every write that finished
// before it, on any agent.
type syncer interface {
	Sync(ctx context.Context) error
}

// Sync catches this agent's copy up with the log, if it can. The API
// calls it before answering "not found": a schema registered through
// another agent a moment ago must not be missing here, or a consumer
// whose producer used that agent fails to deserialize.
func (r *Registry) Sync(ctx context.Context) error {
	if s, ok := r.md.(syncer); ok {
		return s.Sync(ctx)
	}
	return nil
}

// notFound reports whether err is one of the registry's 404s.
func notFound(err error) bool {
	e, ok := IsRegistryError(err)
	return ok && e.Status == http.StatusNotFound
}

// IsRegistryError reports whether err is a refusal to answer as is.
func IsRegistryError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Lookup returns the version of subject that holds the schema (40403 if
// none does, 40401 if the subject has no version).
func (r *Registry) Lookup(subject string, req RegisterRequest, normalize, deleted bool) (Registered, error) {
	f, err := r.format(req.SchemaType)
	if err != nil {
		return Registered{}, err
	}
	v := r.md.View()
	defer v.Close()
	s, err := parseRequest(v, f, req)
	if err != nil {
		return Registered{}, err
	}
	versions, err := v.SchemaVersions(subject)
	if err != nil {
		return Registered{}, err
	}
	if !slices.ContainsFunc(versions, func(sv meta.SchemaVersion) bool { return deleted || !sv.Deleted }) {
		return Registered{}, newError(http.StatusNotFound, meta.SchemaErrSubjectNotFound, "Subject '%s' not found.", subject)
	}
	id, ok, err := v.SchemaIDOf(string(f.Type()), s.Canonical(normalize), metaRefs(req.References))
	if err != nil {
		return Registered{}, err
	}
	if ok {
		for i := len(versions) - 1; i >= 0; i-- {
			if sv := versions[i]; sv.ID == id && (deleted || !sv.Deleted) {
				reg := Registered{Subject: subject, Version: sv.Version, ID: id, Schema: s.Canonical(normalize), References: req.References}
				if f.Type() != TypeAvro {
					reg.SchemaType = f.Type()
				}
				return reg, nil
			}
		}
	}
	return Registered{}, newError(http.StatusNotFound, 40403, "Schema not found")
}

// Delete deletes subject's version (0: all of them), soft or permanent,
// and returns the versions deleted.
func (r *Registry) Delete(ctx context.Context, subject string, version int32, permanent bool) ([]int32, error) {
	res, err := r.propose(ctx, meta.DeleteSchemas{Subject: subject, Version: version, Permanent: permanent})
	return res.SchemaVersions, err
}

// SubjectVersion names one subject's version.
type SubjectVersion struct {
	Subject string `json:"subject"`
	Version int32  `json:"version"`
}

// VersionsOf returns the subjects' versions that name schema id.
func (r *Registry) VersionsOf(id int32, deleted bool) ([]SubjectVersion, error) {
	v := r.md.View()
	defer v.Close()
	subjects, _, err := v.SchemaSubjects()
	if err != nil {
		return nil, err
	}
	out := []SubjectVersion{}
	for _, s := range subjects {
		vs, err := v.SchemaVersions(s)
		if err != nil {
			return nil, err
		}
		for _, sv := range vs {
			if sv.ID == id && (deleted || !sv.Deleted) {
				out = append(out, SubjectVersion{Subject: s, Version: sv.Version})
			}
		}
	}
	return out, nil
}

// Compatible checks a schema against subject's version (-1: the latest
// live one) alone, at the subject's level's direction, or (version 0)
// against its live versions as registering would, and returns why it
// is not compatible (nil: it is), as POST /compatibility does. A
// subject with no version is compatible; a version it lacks is 40402.
func (r *Registry) Compatible(subject string, version int32, req RegisterRequest, normalize bool) ([]string, error) {
	f, err := r.format(req.SchemaType)
	if err != nil {
		return nil, err
	}
	v := r.md.View()
	defer v.Close()
	s, err := parseRequest(v, f, req)
	if err != nil {
		return nil, err
	}
	level, err := r.levelOf(v, subject)
	if err != nil {
		return nil, err
	}
	vs, err := v.SchemaVersions(subject)
	if err != nil {
		return nil, err
	}
	var against []Schema
	var versions []int32
	for _, sv := range vs {
		if sv.Deleted || (version > 0 && sv.Version != version) {
			continue
		}
		old, err := r.parseStored(v, sv.ID)
		if err != nil {
			return nil, err
		}
		against = append(against, old)
		versions = append(versions, sv.Version)
	}
	if version > 0 && len(against) == 0 {
		return nil, newError(http.StatusNotFound, meta.SchemaErrVersionNotFound, "Version %d not found.", version)
	}
	if version == -1 && len(against) > 1 {
		// latest alone, at any level
		against, versions = against[len(against)-1:], versions[len(versions)-1:]
	}
	return checkMessages(f, level, s, against, versions), nil
}

// ConfigOf returns subject's compatibility level, or the global one
// (global), falling back to the global one and the default when the
// subject has none and defaultToGlobal (40408 when not).
func (r *Registry) ConfigOf(subject string, global, defaultToGlobal bool) (Level, error) {
	v := r.md.View()
	defer v.Close()
	if global || defaultToGlobal {
		if global {
			subject = "" // no subject has that name: the global level, or the default
		}
		return r.levelOf(v, subject)
	}
	c, err := v.SchemaConfigOf(subject, false)
	if err != nil {
		return "", err
	}
	if c.Compatibility == "" {
		return "", newError(http.StatusNotFound, meta.SchemaErrCompatNotConfigured, "Subject '%s' does not have subject-level compatibility configured", subject)
	}
	return Level(c.Compatibility), nil
}

// ModeOf returns subject's mode, or the global one (global), falling
// back to the global one when the subject has none and defaultToGlobal
// (40409 when not); the global mode is READWRITE unset.
func (r *Registry) ModeOf(subject string, global, defaultToGlobal bool) (string, error) {
	v := r.md.View()
	defer v.Close()
	for _, g := range []bool{global, true} {
		c, err := v.SchemaConfigOf(subject, g)
		if err != nil {
			return "", err
		}
		if c.Mode != "" {
			return c.Mode, nil
		}
		if !g && !defaultToGlobal {
			return "", newError(http.StatusNotFound, meta.SchemaErrModeNotConfigured, "Subject '%s' does not have subject-level mode configured", subject)
		}
	}
	return "READWRITE", nil
}

// MaxID returns the highest schema id assigned so far (0: none).
func (r *Registry) MaxID() (int32, error) {
	v := r.md.View()
	defer v.Close()
	return v.SchemaMaxID()
}

// ReferencedBy returns the ids of the schemas, named by a live version
// of some subject (any version, with deleted), that reference subject's
// version (-1: the latest live one), ascending.
func (r *Registry) ReferencedBy(subject string, version int32, deleted bool) ([]int32, error) {
	v := r.md.View()
	defer v.Close()
	target, err := versionOf(v, subject, version, version != -1)
	if err != nil {
		return nil, err
	}
	subjects, _, err := v.SchemaSubjects()
	if err != nil {
		return nil, err
	}
	out := []int32{}
	for _, s := range subjects {
		vs, err := v.SchemaVersions(s)
		if err != nil {
			return nil, err
		}
		for _, sv := range vs {
			if (sv.Deleted && !deleted) || slices.Contains(out, sv.ID) {
				continue
			}
			st, ok, err := v.SchemaByID(sv.ID)
			if err != nil {
				return nil, err
			}
			if ok && slices.ContainsFunc(st.References, func(ref meta.SchemaReference) bool {
				return ref.Subject == subject && ref.Version == target.Version
			}) {
				out = append(out, sv.ID)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
