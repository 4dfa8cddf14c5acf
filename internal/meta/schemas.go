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
