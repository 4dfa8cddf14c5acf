package meta

import (
	"encoding/binary"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The apply of the schema registry's commands (schemas.go has the
// commands, their records and the View's reads).

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
