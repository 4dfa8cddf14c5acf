package meta

// Schema registry records (metadata level 6): Confluent Schema
// Registry's model, kept like all metadata so every agent answers
// lookups from its own copy. A schema is stored once under a global id,
// assigned in apply (the next unused one), and reused for the same
// schema (type, text and references) under any subject; a subject holds
// versions 1, 2, ... naming ids, soft-deleted before they are deleted
// for good; configs and modes are per subject or global.
//
// What a schema means (parsing, canonical text, compatibility) is the
// registry's business (package schemareg), as Kafka's configs are the
// Kafka layer's: the proposer parses and checks, and a registration
// carries the subject's latest live version it checked against
// (Expect). Apply refuses it if the subject moved since, so two agents
// checking at once cannot both register against a version that is no
// longer the latest. Apply checks only what the records can tell:
// names, sizes, references that exist, modes, ids in IMPORT mode.
//
// Refusals carry Confluent's error code in Result.SchemaError, which
// the REST API returns as is.

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Record prefixes of the schema registry.
const (
	// prefixSchema keys a schema by id (4 bytes, big-endian).
	prefixSchema byte = 0x27
	// prefixSchemaContent keys a schema's id by the SHA-256 of its
	// type, text and references: one id per schema.
	prefixSchemaContent byte = 0x28
	// prefixSchemaSubject keys a subject's version: the subject, 0x00,
	// the version (4 bytes, big-endian). Subjects hold no NUL.
	prefixSchemaSubject byte = 0x29
	// prefixSchemaConfig keys the global config (0x00) and subjects'
	// (0x01, then the subject): compatibility level and mode.
	prefixSchemaConfig byte = 0x2A
	// prefixSchemaNextID is the one record of the next id to assign.
	prefixSchemaNextID byte = 0x2B
)

var keySchemaNextID = []byte{prefixSchemaNextID}

// Command types of the schema registry, written from level 6.
const (
	TypeRegisterSchema CommandType = 32
	TypeDeleteSchemas  CommandType = 33
	TypeSchemaConfig   CommandType = 34
)

// Limits of apply, part of what apply means.
const (
	// MaxSchemaSubjectBytes bounds a subject name.
	MaxSchemaSubjectBytes = 1024
	// MaxSchemaBytes bounds a schema's text: a log entry carries it.
	MaxSchemaBytes = 512 << 10
	// maxSchemaReferences bounds one schema's references.
	maxSchemaReferences = 256
)

// Confluent's error codes, the ones apply returns (Result.SchemaError)
// and those the registry answers itself (40408, 40409).
const (
	SchemaErrSubjectNotFound        int32 = 40401
	SchemaErrVersionNotFound        int32 = 40402
	SchemaErrSubjectSoftDeleted     int32 = 40404
	SchemaErrSubjectNotSoftDeleted  int32 = 40405
	SchemaErrVersionSoftDeleted     int32 = 40406
	SchemaErrVersionNotSoftDeleted  int32 = 40407
	SchemaErrCompatNotConfigured    int32 = 40408
	SchemaErrModeNotConfigured      int32 = 40409
	SchemaErrIncompatible           int32 = 409
	SchemaErrInvalidSchema          int32 = 42201
	SchemaErrInvalidVersion         int32 = 42202
	SchemaErrInvalidCompatibility   int32 = 42203
	SchemaErrInvalidMode            int32 = 42204
	SchemaErrOperationNotPermitted  int32 = 42205
	SchemaErrReferenceExists        int32 = 42206
	SchemaErrIDInUse                int32 = 42207
	SchemaErrInvalidSubject         int32 = 42208
	SchemaErrSchemaTooLarge         int32 = 42209
	SchemaErrSubjectMovedSinceCheck int32 = 50003
)

// SchemaReference is a reference from one schema to another registered
// one, by the name the referring schema uses.
type SchemaReference struct {
	Name    string
	Subject string
	Version int32
}

// RegisterSchema registers a schema under a subject: the subject's
// version naming the schema's id, a new version unless the subject
// already holds the schema live (then its version, unchanged; a
// soft-deleted version of it is replaced by the new one). Expect is the
// subject's latest live version the proposer checked compatibility
// against (0: none); ID is an import's (the subject or the registry in
// IMPORT mode), with the Version to import it as (0: the one after the
// subject's highest), which may come before versions the subject has,
// as an import replays a registry's history in any order.
// Result: SchemaID and SchemaVersion; or SchemaError 42201 (bad
// subject, type, text or reference), 42209 (too large), 42205
// (READONLY, an id outside IMPORT, or an id naming another schema),
// 42207 (the schema has another id), 42202 (an imported version the
// subject holds with another schema), 50003 (the subject moved).
type RegisterSchema struct {
	Subject    string
	SchemaType string
	Schema     string
	References []SchemaReference
	Expect     int32
	ID         int32
	Version    int32
}

// DeleteSchemas deletes a subject's version (Version > 0) or all its
// versions (0): soft (they stay, marked deleted: lookups by id still
// find the schema) or Permanent (only what was soft-deleted first; a
// schema no version names any more goes with it, and so do the
// subject's config and mode with its last version). A version that
// another schema references cannot be deleted: softly while a live
// version names the referrer, permanently while any version does (a
// soft delete can be undone by registering again); deleting a whole
// subject ignores its references to itself.
// Result: SchemaVersions, the versions deleted; or SchemaError 40401,
// 40402, 40404/40406 (soft-deleting what is), 40405/40407 (permanently
// deleting what was not soft-deleted), 42206 (referenced), 42205
// (READONLY or READONLY_OVERRIDE).
type DeleteSchemas struct {
	Subject   string
	Version   int32
	Permanent bool
}

// SchemaConfig sets or deletes the compatibility level and the mode of
// a subject, or the global ones (Global). Empty values change nothing.
// IMPORT needs a subject (or registry) without live versions unless
// Force or already importing; the compatibility level cannot change
// while the mode in force is READONLY (the mode can: it is the way
// out).
// Result: SchemaError 42203 or 42204 for an unknown level or mode,
// 42205 for IMPORT over live versions without Force, or a level
// changed under READONLY.
type SchemaConfig struct {
	Subject       string
	Global        bool
	Compatibility string
	Mode          string
	DeleteCompat  bool
	DeleteMode    bool
	Force         bool
}

func (RegisterSchema) Type() CommandType { return TypeRegisterSchema }
func (RegisterSchema) version() uint16   { return 1 }
func (DeleteSchemas) Type() CommandType  { return TypeDeleteSchemas }
func (DeleteSchemas) version() uint16    { return 1 }
func (SchemaConfig) Type() CommandType   { return TypeSchemaConfig }
func (SchemaConfig) version() uint16     { return 1 }

func (c RegisterSchema) appendPayload(b []byte) []byte {
	b = appendString(b, c.Subject)
	b = appendString(b, c.SchemaType)
	b = appendString(b, c.Schema)
	b = appendSchemaReferences(b, c.References)
	b = appendVarint(b, int64(c.Expect))
	b = appendVarint(b, int64(c.ID))
	return appendVarint(b, int64(c.Version))
}

func decodeRegisterSchemaV1(p []byte) (RegisterSchema, error) {
	r := &reader{b: p}
	var c RegisterSchema
	c.Subject = r.string()
	c.SchemaType = r.string()
	c.Schema = r.string()
	c.References = r.schemaReferences()
	c.Expect = r.int32()
	c.ID = r.int32()
	c.Version = r.int32()
	return c, r.done()
}

func (c DeleteSchemas) appendPayload(b []byte) []byte {
	b = appendString(b, c.Subject)
	b = appendVarint(b, int64(c.Version))
	return appendBool(b, c.Permanent)
}

func decodeDeleteSchemasV1(p []byte) (DeleteSchemas, error) {
	r := &reader{b: p}
	var c DeleteSchemas
	c.Subject = r.string()
	c.Version = r.int32()
	c.Permanent = r.bool()
	return c, r.done()
}

func (c SchemaConfig) appendPayload(b []byte) []byte {
	b = appendString(b, c.Subject)
	b = appendBool(b, c.Global)
	b = appendString(b, c.Compatibility)
	b = appendString(b, c.Mode)
	b = appendBool(b, c.DeleteCompat)
	b = appendBool(b, c.DeleteMode)
	return appendBool(b, c.Force)
}

func decodeSchemaConfigV1(p []byte) (SchemaConfig, error) {
	r := &reader{b: p}
	var c SchemaConfig
	c.Subject = r.string()
	c.Global = r.bool()
	c.Compatibility = r.string()
	c.Mode = r.string()
	c.DeleteCompat = r.bool()
	c.DeleteMode = r.bool()
	c.Force = r.bool()
	return c, r.done()
}

func appendSchemaReferences(b []byte, refs []SchemaReference) []byte {
	b = appendUvarint(b, uint64(len(refs)))
	for _, ref := range refs {
		b = appendString(b, ref.Name)
		b = appendString(b, ref.Subject)
		b = appendVarint(b, int64(ref.Version))
	}
	return b
}

func (r *reader) schemaReferences() []SchemaReference {
	n := r.count(3)
	if n == 0 {
		return nil
	}
	refs := make([]SchemaReference, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		refs = append(refs, SchemaReference{Name: r.string(), Subject: r.string(), Version: r.int32()})
	}
	return refs
}

// Schema types, as Confluent's API names them.
var schemaTypes = []string{"AVRO", "JSON", "PROTOBUF"}

// Compatibility levels and modes, as Confluent's API names them.
var (
	schemaLevels = []string{"BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE"}
	schemaModes  = []string{"IMPORT", "READONLY", "READONLY_OVERRIDE", "READWRITE"}
)

// StoredSchema is a registered schema by id.
type StoredSchema struct {
	ID         int32
	SchemaType string
	Schema     string
	References []SchemaReference
}

// SchemaVersion is one version of a subject.
type SchemaVersion struct {
	Version int32
	ID      int32
	Deleted bool
}

// SchemaConfigRecord is a subject's or the global config: "" is unset.
type SchemaConfigRecord struct {
	Compatibility string
	Mode          string
}

func schemaKey(id int32) []byte {
	return binary.BigEndian.AppendUint32([]byte{prefixSchema}, uint32(id))
}

func schemaSubjectPrefix(subject string) []byte {
	return append(append([]byte{prefixSchemaSubject}, subject...), 0)
}

func schemaSubjectKey(subject string, version int32) []byte {
	return binary.BigEndian.AppendUint32(schemaSubjectPrefix(subject), uint32(version))
}

func schemaConfigKey(subject string, global bool) []byte {
	if global {
		return []byte{prefixSchemaConfig, 0}
	}
	return append([]byte{prefixSchemaConfig, 1}, subject...)
}

// schemaContentKey is the content index key: a hash of everything that
// makes two schemas the same one.
func schemaContentKey(schemaType, schema string, refs []SchemaReference) []byte {
	h := sha256.New()
	var b []byte
	b = appendString(b, schemaType)
	b = appendString(b, schema)
	b = appendSchemaReferences(b, refs)
	h.Write(b)
	return h.Sum([]byte{prefixSchemaContent})
}

func encodeStoredSchema(s StoredSchema) []byte {
	b := []byte{recordV1}
	b = appendString(b, s.SchemaType)
	b = appendString(b, s.Schema)
	return appendSchemaReferences(b, s.References)
}

func decodeStoredSchema(id int32, v []byte) (StoredSchema, error) {
	r := recordReader(v)
	s := StoredSchema{ID: id, SchemaType: r.string(), Schema: r.string(), References: r.schemaReferences()}
	if err := r.done(); err != nil {
		return StoredSchema{}, corrupt("schema", err)
	}
	return s, nil
}

func encodeSchemaVersion(v SchemaVersion) []byte {
	b := appendVarint([]byte{recordV1}, int64(v.ID))
	return appendBool(b, v.Deleted)
}

func decodeSchemaVersion(version int32, v []byte) (SchemaVersion, error) {
	r := recordReader(v)
	sv := SchemaVersion{Version: version, ID: r.int32(), Deleted: r.bool()}
	if err := r.done(); err != nil {
		return SchemaVersion{}, corrupt("schema version", err)
	}
	return sv, nil
}

func encodeSchemaConfig(c SchemaConfigRecord) []byte {
	b := appendString([]byte{recordV1}, c.Compatibility)
	return appendString(b, c.Mode)
}

func decodeSchemaConfig(v []byte) (SchemaConfigRecord, error) {
	r := recordReader(v)
	c := SchemaConfigRecord{Compatibility: r.string(), Mode: r.string()}
	if err := r.done(); err != nil {
		return SchemaConfigRecord{}, corrupt("schema config", err)
	}
	return c, nil
}

// schemaFailed is a refusal with Confluent's code.
func schemaFailed(code int32, format string, args ...any) Result {
	r := failed(kerr.InvalidRequest, format, args...)
	r.SchemaError = code
	return r
}

// validSubject reports why subject cannot be one, "" if it can.
func validSubject(subject string) string {
	switch {
	case subject == "":
		return "empty subject"
	case len(subject) > MaxSchemaSubjectBytes:
		return "subject longer than 1024 bytes"
	case strings.ContainsFunc(subject, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "subject holds a control character"
	}
	return ""
}

// schemaVersions lists a subject's versions, ascending.
func (a *Applier) schemaVersions(subject string) ([]SchemaVersion, error) {
	lo, hi := spanOf(schemaSubjectPrefix(subject))
	it, err := a.b.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	return collectSchemaVersions(it, len(lo))
}

func collectSchemaVersions(it Iterator, prefixLen int) ([]SchemaVersion, error) {
	var out []SchemaVersion
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != prefixLen+4 {
			return nil, corrupt("schema version key", errShort)
		}
		sv, err := decodeSchemaVersion(int32(binary.BigEndian.Uint32(k[prefixLen:])), it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, sv)
	}
	return out, it.Error()
}

// schemaMode is the mode in force for subject: its own, else global,
// else READWRITE.
func (a *Applier) schemaMode(subject string) (string, error) {
	for _, k := range [][]byte{schemaConfigKey(subject, false), schemaConfigKey("", true)} {
		v, ok, err := a.get(k)
		if err != nil {
			return "", err
		}
		if ok {
			c, err := decodeSchemaConfig(v)
			if err != nil {
				return "", err
			}
			if c.Mode != "" {
				return c.Mode, nil
			}
		}
	}
	return "READWRITE", nil
}

func (a *Applier) registerSchema(c RegisterSchema) (Result, error) {
	if why := validSubject(c.Subject); why != "" {
		return schemaFailed(SchemaErrInvalidSubject, "%s", why), nil
	}
	switch {
	case !slices.Contains(schemaTypes, c.SchemaType):
		return schemaFailed(SchemaErrInvalidSchema, "unknown schema type %q", c.SchemaType), nil
	case c.Schema == "":
		return schemaFailed(SchemaErrInvalidSchema, "Empty schema"), nil
	case len(c.Schema) > MaxSchemaBytes:
		return schemaFailed(SchemaErrSchemaTooLarge, "schema of %d bytes, at most %d", len(c.Schema), MaxSchemaBytes), nil
	case len(c.References) > maxSchemaReferences:
		return schemaFailed(SchemaErrInvalidSchema, "%d references, at most %d", len(c.References), maxSchemaReferences), nil
	case c.ID < 0 || c.Version < 0 || (c.ID == 0 && c.Version != 0):
		return schemaFailed(SchemaErrInvalidSchema, "an import names a positive id, and a positive version or none"), nil
	}
	for _, ref := range c.References {
		if ref.Name == "" || validSubject(ref.Subject) != "" || ref.Version <= 0 {
			return schemaFailed(SchemaErrInvalidSchema, "invalid reference %q to %q version %d", ref.Name, ref.Subject, ref.Version), nil
		}
		v, ok, err := a.get(schemaSubjectKey(ref.Subject, ref.Version))
		if err != nil {
			return Result{}, err
		}
		if !ok {
			return schemaFailed(SchemaErrInvalidSchema, "reference %q: subject %q has no version %d", ref.Name, ref.Subject, ref.Version), nil
		}
		if sv, err := decodeSchemaVersion(ref.Version, v); err != nil {
			return Result{}, err
		} else if sv.Deleted {
			return schemaFailed(SchemaErrInvalidSchema, "reference %q: version %d of subject %q is deleted", ref.Name, ref.Version, ref.Subject), nil
		}
	}
	mode, err := a.schemaMode(c.Subject)
	if err != nil {
		return Result{}, err
	}
	switch {
	case mode == "READONLY" || mode == "READONLY_OVERRIDE":
		return schemaFailed(SchemaErrOperationNotPermitted, "subject %q is in %s mode", c.Subject, mode), nil
	case c.ID != 0 && mode != "IMPORT":
		return schemaFailed(SchemaErrOperationNotPermitted, "a schema with an id is registered only in IMPORT mode, not %s", mode), nil
	case c.ID == 0 && mode == "IMPORT":
		return schemaFailed(SchemaErrOperationNotPermitted, "subject %q is in IMPORT mode: a registration names its id", c.Subject), nil
	}

	contentKey := schemaContentKey(c.SchemaType, c.Schema, c.References)
	var id int32
	v, known, err := a.get(contentKey)
	if err != nil {
		return Result{}, err
	}
	if known {
		if len(v) != 4 {
			return Result{}, corrupt("schema content index", errShort)
		}
		id = int32(binary.BigEndian.Uint32(v))
	}
	versions, err := a.schemaVersions(c.Subject)
	if err != nil {
		return Result{}, err
	}
	latest, highest := int32(0), int32(0)
	var taken *SchemaVersion // the version an import names, if the subject has it
	for i, sv := range versions {
		if known && sv.ID == id && !sv.Deleted && (c.Version == 0 || c.Version == sv.Version) {
			// The subject holds the schema: nothing to register.
			return Result{SchemaID: id, SchemaVersion: sv.Version}, nil
		}
		if !sv.Deleted {
			latest = sv.Version
		}
		if sv.Version == c.Version {
			taken = &versions[i]
		}
		highest = sv.Version
	}
	if c.ID == 0 && latest != c.Expect {
		return schemaFailed(SchemaErrSubjectMovedSinceCheck, "subject %q is at version %d, checked against %d: check again", c.Subject, latest, c.Expect), nil
	}

	next, err := a.schemaNextID()
	if err != nil {
		return Result{}, err
	}
	version := highest + 1
	if c.ID != 0 {
		if known && id != c.ID {
			return schemaFailed(SchemaErrIDInUse, "The ID of an imported schema does not match the existing ID: the schema is registered with id %d, not %d", id, c.ID), nil
		}
		if !known {
			if _, inUse, err := a.get(schemaKey(c.ID)); err != nil {
				return Result{}, err
			} else if inUse {
				return schemaFailed(SchemaErrOperationNotPermitted, "Overwrite new schema with id %d is not permitted.", c.ID), nil
			}
		}
		if taken != nil {
			// Confluent's import overwrites the version; refusing keeps
			// what a reader of that version was given.
			return schemaFailed(SchemaErrInvalidVersion, "version %d of subject %q names schema %d: an import does not overwrite a version", c.Version, c.Subject, taken.ID), nil
		}
		id = c.ID
		if c.Version != 0 {
			version = c.Version
		}
		next = max(next, id+1)
	} else if !known {
		id = next
		next++
	}
	if !known {
		s := StoredSchema{ID: id, SchemaType: c.SchemaType, Schema: c.Schema, References: c.References}
		if err := a.b.Set(schemaKey(id), encodeStoredSchema(s)); err != nil {
			return Result{}, err
		}
		if err := a.b.Set(contentKey, binary.BigEndian.AppendUint32(nil, uint32(id))); err != nil {
			return Result{}, err
		}
	}
	if err := a.b.Set(keySchemaNextID, binary.BigEndian.AppendUint32(nil, uint32(next))); err != nil {
		return Result{}, err
	}
	if err := a.b.Set(schemaSubjectKey(c.Subject, version), encodeSchemaVersion(SchemaVersion{ID: id})); err != nil {
		return Result{}, err
	}
	// The schema registered again replaces its soft-deleted versions
	// below the new one, as Confluent's does, but for a version a
	// reference still names.
	for _, sv := range versions {
		if !known || !sv.Deleted || sv.ID != id || sv.Version >= version {
			continue
		}
		ref, err := a.schemaReferencedBy(c.Subject, sv.Version, true, "")
		if err != nil {
			return Result{}, err
		}
		if ref == 0 {
			if err := a.b.Delete(schemaSubjectKey(c.Subject, sv.Version)); err != nil {
				return Result{}, err
			}
		}
	}
	return Result{SchemaID: id, SchemaVersion: version}, nil
}

// schemaNextID is the next id to assign: 1 first, as Confluent's.
func (a *Applier) schemaNextID() (int32, error) {
	v, ok, err := a.get(keySchemaNextID)
	if err != nil || !ok {
		return 1, err
	}
	if len(v) != 4 {
		return 0, corrupt("schema next id", errShort)
	}
	return int32(binary.BigEndian.Uint32(v)), nil
}

func (a *Applier) deleteSchemas(c DeleteSchemas) (Result, error) {
	if why := validSubject(c.Subject); why != "" {
		return schemaFailed(SchemaErrInvalidSubject, "%s", why), nil
	}
	if c.Version < 0 {
		return schemaFailed(SchemaErrInvalidVersion, "version %d", c.Version), nil
	}
	mode, err := a.schemaMode(c.Subject)
	if err != nil {
		return Result{}, err
	}
	if mode == "READONLY" || mode == "READONLY_OVERRIDE" {
		return schemaFailed(SchemaErrOperationNotPermitted, "subject %q is in %s mode", c.Subject, mode), nil
	}
	versions, err := a.schemaVersions(c.Subject)
	if err != nil {
		return Result{}, err
	}
	if len(versions) == 0 {
		return schemaFailed(SchemaErrSubjectNotFound, "Subject '%s' not found.", c.Subject), nil
	}
	var targets []SchemaVersion
	if c.Version == 0 {
		live := 0
		for _, sv := range versions {
			if !sv.Deleted {
				live++
			}
		}
		switch {
		case !c.Permanent && live == 0:
			return schemaFailed(SchemaErrSubjectSoftDeleted, "Subject '%s' was soft deleted. Set permanent=true to delete permanently", c.Subject), nil
		case c.Permanent && live > 0:
			return schemaFailed(SchemaErrSubjectNotSoftDeleted, "Subject '%s' was not deleted first before being permanently deleted", c.Subject), nil
		}
		for _, sv := range versions {
			if sv.Deleted == c.Permanent {
				targets = append(targets, sv)
			}
		}
	} else {
		i := slices.IndexFunc(versions, func(sv SchemaVersion) bool { return sv.Version == c.Version })
		switch {
		case i < 0:
			return schemaFailed(SchemaErrVersionNotFound, "Version %d not found.", c.Version), nil
		case !c.Permanent && versions[i].Deleted:
			return schemaFailed(SchemaErrVersionSoftDeleted, "Subject '%s' Version %d was soft deleted. Set permanent=true to delete permanently", c.Subject, c.Version), nil
		case c.Permanent && !versions[i].Deleted:
			return schemaFailed(SchemaErrVersionNotSoftDeleted, "Subject '%s' Version %d was not deleted first before being permanently deleted", c.Subject, c.Version), nil
		}
		targets = versions[i : i+1]
	}
	// A version another schema references stays.
	except := ""
	if c.Version == 0 {
		except = c.Subject
	}
	for _, sv := range targets {
		ref, err := a.schemaReferencedBy(c.Subject, sv.Version, c.Permanent, except)
		if err != nil {
			return Result{}, err
		}
		if ref != 0 {
			return schemaFailed(SchemaErrReferenceExists, "One or more references exist to the schema {subject=%s,version=%d}: schema id %d", c.Subject, sv.Version, ref), nil
		}
	}
	res := Result{}
	for _, sv := range targets {
		key := schemaSubjectKey(c.Subject, sv.Version)
		if c.Permanent {
			err = a.b.Delete(key)
		} else {
			sv.Deleted = true
			err = a.b.Set(key, encodeSchemaVersion(sv))
		}
		if err != nil {
			return Result{}, err
		}
		res.SchemaVersions = append(res.SchemaVersions, sv.Version)
	}
	if !c.Permanent {
		return res, nil
	}
	if len(targets) == len(versions) {
		// The subject is gone: its config and mode go with it, as
		// Confluent's.
		if err := a.b.Delete(schemaConfigKey(c.Subject, false)); err != nil {
			return Result{}, err
		}
	}
	for _, sv := range targets {
		if err := a.dropSchemaIfUnnamed(sv.ID); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// dropSchemaIfUnnamed deletes schema id, and its content index entry,
// when no version of any subject names it any more: a hard-deleted
// schema's id is not found again (nor reused: the next id stays). It
// reads every version, in the batch, so versions this command deleted
// are gone: deletions for good are rare.
func (a *Applier) dropSchemaIfUnnamed(id int32) error {
	it, err := a.b.NewIter([]byte{prefixSchemaSubject}, []byte{prefixSchemaSubject + 1})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		sv, err := decodeSchemaVersion(0, it.Value())
		if err != nil {
			return err
		}
		if sv.ID == id {
			return nil
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	v, ok, err := a.get(schemaKey(id))
	if err != nil || !ok {
		return err
	}
	s, err := decodeStoredSchema(id, v)
	if err != nil {
		return err
	}
	if err := a.b.Delete(schemaContentKey(s.SchemaType, s.Schema, s.References)); err != nil {
		return err
	}
	return a.b.Delete(schemaKey(id))
}

// schemaReferencedBy returns the id of a schema that references
// subject's version and that a version of some subject other than
// except names (a live one unless deleted), or 0. It reads every
// schema: references are rare, and deletions rarer.
func (a *Applier) schemaReferencedBy(subject string, version int32, deleted bool, except string) (int32, error) {
	it, err := a.b.NewIter([]byte{prefixSchema}, []byte{prefixSchema + 1})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	var referring []int32
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 5 {
			return 0, corrupt("schema key", errShort)
		}
		id := int32(binary.BigEndian.Uint32(k[1:]))
		s, err := decodeStoredSchema(id, it.Value())
		if err != nil {
			return 0, err
		}
		if slices.ContainsFunc(s.References, func(r SchemaReference) bool { return r.Subject == subject && r.Version == version }) {
			referring = append(referring, id)
		}
	}
	if err := it.Error(); err != nil || len(referring) == 0 {
		return 0, err
	}
	// Referenced only by schemas no (live) version names any more: free.
	sit, err := a.b.NewIter([]byte{prefixSchemaSubject}, []byte{prefixSchemaSubject + 1})
	if err != nil {
		return 0, err
	}
	defer sit.Close()
	for ok := sit.First(); ok; ok = sit.Next() {
		k := sit.Key()
		if len(k) < 6 {
			return 0, corrupt("schema version key", errShort)
		}
		sv, err := decodeSchemaVersion(int32(binary.BigEndian.Uint32(k[len(k)-4:])), sit.Value())
		if err != nil {
			return 0, err
		}
		if (deleted || !sv.Deleted) && string(k[1:len(k)-5]) != except && slices.Contains(referring, sv.ID) {
			return sv.ID, nil
		}
	}
	return 0, sit.Error()
}

func (a *Applier) schemaConfig(c SchemaConfig) (Result, error) {
	if !c.Global {
		if why := validSubject(c.Subject); why != "" {
			return schemaFailed(SchemaErrInvalidSubject, "%s", why), nil
		}
	}
	if c.Compatibility != "" && !slices.Contains(schemaLevels, c.Compatibility) {
		return schemaFailed(SchemaErrInvalidCompatibility, "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive"), nil
	}
	if c.Mode != "" && !slices.Contains(schemaModes, c.Mode) {
		return schemaFailed(SchemaErrInvalidMode, "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, IMPORT"), nil
	}
	subject := c.Subject
	if c.Global {
		subject = "" // no subject's name: the global mode
	}
	mode, err := a.schemaMode(subject)
	if err != nil {
		return Result{}, err
	}
	if (c.Compatibility != "" || c.DeleteCompat) && (mode == "READONLY" || mode == "READONLY_OVERRIDE") {
		return schemaFailed(SchemaErrOperationNotPermitted, "Subject %s is in read-only mode", subject), nil
	}
	if c.Mode == "IMPORT" && mode != "IMPORT" && !c.Force {
		// Confluent refuses IMPORT over live schemas: imported ids
		// could clash with assigned ones.
		lo, hi := spanOf([]byte{prefixSchemaSubject})
		if !c.Global {
			lo, hi = spanOf(schemaSubjectPrefix(c.Subject))
		}
		live, err := a.anyLiveSchemaVersion(lo, hi)
		if err != nil {
			return Result{}, err
		}
		if live {
			return schemaFailed(SchemaErrOperationNotPermitted, "Cannot import since found existing subjects"), nil
		}
	}
	key := schemaConfigKey(c.Subject, c.Global)
	var cur SchemaConfigRecord
	v, ok, err := a.get(key)
	if err != nil {
		return Result{}, err
	}
	if ok {
		if cur, err = decodeSchemaConfig(v); err != nil {
			return Result{}, err
		}
	}
	if c.DeleteCompat {
		cur.Compatibility = ""
	}
	if c.DeleteMode {
		cur.Mode = ""
	}
	if c.Compatibility != "" {
		cur.Compatibility = c.Compatibility
	}
	if c.Mode != "" {
		cur.Mode = c.Mode
	}
	if cur == (SchemaConfigRecord{}) {
		return Result{}, a.b.Delete(key)
	}
	return Result{}, a.b.Set(key, encodeSchemaConfig(cur))
}

// anyLiveSchemaVersion reports whether a version in [lo, hi) is live.
func (a *Applier) anyLiveSchemaVersion(lo, hi []byte) (bool, error) {
	it, err := a.b.NewIter(lo, hi)
	if err != nil {
		return false, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		sv, err := decodeSchemaVersion(0, it.Value())
		if err != nil {
			return false, err
		}
		if !sv.Deleted {
			return true, nil
		}
	}
	return false, it.Error()
}

// SchemaByID returns the schema registered with id.
func (v *View) SchemaByID(id int32) (StoredSchema, bool, error) {
	val, ok, err := v.r.Get(schemaKey(id))
	if err != nil || !ok {
		return StoredSchema{}, false, err
	}
	s, err := decodeStoredSchema(id, val)
	return s, err == nil, err
}

// SchemaIDOf returns the id of a schema registered with this type, text
// and references.
func (v *View) SchemaIDOf(schemaType, schema string, refs []SchemaReference) (int32, bool, error) {
	val, ok, err := v.r.Get(schemaContentKey(schemaType, schema, refs))
	if err != nil || !ok {
		return 0, false, err
	}
	if len(val) != 4 {
		return 0, false, corrupt("schema content index", errShort)
	}
	return int32(binary.BigEndian.Uint32(val)), true, nil
}

// SchemaVersions returns a subject's versions, ascending, soft-deleted
// ones included (Deleted).
func (v *View) SchemaVersions(subject string) ([]SchemaVersion, error) {
	lo, hi := spanOf(schemaSubjectPrefix(subject))
	it, err := v.r.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	return collectSchemaVersions(it, len(lo))
}

// SchemaSubjects returns every subject with a version, sorted, and
// whether each has a live one.
func (v *View) SchemaSubjects() (subjects []string, live []bool, err error) {
	it, err := v.r.NewIter([]byte{prefixSchemaSubject}, []byte{prefixSchemaSubject + 1})
	if err != nil {
		return nil, nil, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) < 6 {
			return nil, nil, corrupt("schema version key", errShort)
		}
		subject := string(k[1 : len(k)-5])
		sv, err := decodeSchemaVersion(0, it.Value())
		if err != nil {
			return nil, nil, err
		}
		if n := len(subjects); n == 0 || subjects[n-1] != subject {
			subjects = append(subjects, subject)
			live = append(live, false)
		}
		live[len(live)-1] = live[len(live)-1] || !sv.Deleted
	}
	return subjects, live, it.Error()
}

// SchemaMaxID returns the highest schema id assigned so far (0: none),
// as Confluent's fetchMaxId reports it.
func (v *View) SchemaMaxID() (int32, error) {
	val, ok, err := v.r.Get(keySchemaNextID)
	if err != nil || !ok {
		return 0, err
	}
	if len(val) != 4 {
		return 0, corrupt("schema next id", errShort)
	}
	return int32(binary.BigEndian.Uint32(val)) - 1, nil
}

// SchemaConfigOf returns a subject's config, or the global one.
func (v *View) SchemaConfigOf(subject string, global bool) (SchemaConfigRecord, error) {
	val, ok, err := v.r.Get(schemaConfigKey(subject, global))
	if err != nil || !ok {
		return SchemaConfigRecord{}, err
	}
	return decodeSchemaConfig(val)
}
