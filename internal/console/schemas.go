// The Schemas pages: the schema registry's subjects (latest version,
// type, compatibility level), a subject's versions with a version's
// text, and a line diff of two versions. They read Config.Registry, the
// agent's registry, directly: no REST call, no Kafka.

package console

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/schemareg"
)

const (
	// maxDiffLines bounds each side of a diff: the matcher's work grows
	// with the product of the sides' lines.
	maxDiffLines = 5000
	// diffContext is how many unchanged lines a diff shows around a
	// change.
	diffContext = 3
)

// errRegistryOff is the answer of a subject page with no registry.
var errRegistryOff = errors.New("the schema registry is off on this agent")

type subjectRow struct {
	Name         string
	Latest, ID   int32
	Type         string
	Level        string
	GlobalLevel  bool // Level is the global one: the subject has none of its own
	VersionCount int
	Err          string
}

type schemasData struct {
	Off         bool
	GlobalLevel string
	Subjects    []subjectRow
	Total       int
	Pager
}

// typeName is a schema's type as the pages show it (the API leaves
// AVRO out).
func typeName(t schemareg.Type) string {
	if t == "" {
		return string(schemareg.TypeAvro)
	}
	return string(t)
}

// levelOf returns subject's compatibility level and whether it is the
// global one, the subject having none of its own.
func levelOf(reg *schemareg.Registry, subject string) (schemareg.Level, bool, error) {
	l, err := reg.ConfigOf(subject, false, false)
	if e, ok := schemareg.IsRegistryError(err); ok && e.Code == 40408 {
		l, err = reg.ConfigOf(subject, false, true)
		return l, true, err
	}
	return l, false, err
}

func (c *Console) handleSchemas(w http.ResponseWriter, r *http.Request) {
	reg := c.cfg.Registry
	if reg == nil {
		c.render(w, r, http.StatusOK, "schemas", page{Title: "Schemas", Nav: "schemas", Data: schemasData{Off: true}})
		return
	}
	subjects, err := reg.Subjects(false)
	if err != nil {
		c.fail(w, r, http.StatusInternalServerError, fmt.Errorf("listing subjects: %w", err))
		return
	}
	global, err := reg.ConfigOf("", true, false)
	if err != nil {
		c.fail(w, r, http.StatusInternalServerError, fmt.Errorf("the global compatibility level: %w", err))
		return
	}
	rows, n, pages := pageOf(subjects, r)
	d := schemasData{GlobalLevel: string(global), Total: len(subjects), Pager: Pager{n, pages}}
	for _, s := range rows {
		row := subjectRow{Name: s}
		latest, err := reg.Version(s, -1, false)
		var vs []meta.SchemaVersion
		if err == nil {
			vs, err = reg.Versions(s, false)
		}
		var level schemareg.Level
		if err == nil {
			level, row.GlobalLevel, err = levelOf(reg, s)
		}
		if err != nil {
			row.Err = err.Error()
		}
		row.Latest, row.ID, row.Type, row.Level, row.VersionCount = latest.Version, latest.ID, typeName(latest.SchemaType), string(level), len(vs)
		d.Subjects = append(d.Subjects, row)
	}
	c.render(w, r, http.StatusOK, "schemas", page{Title: "Schemas", Nav: "schemas", Data: d})
}

// registryFail renders a registry error with its status (404 for an
// unknown subject or version, ...).
func (c *Console) registryFail(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusInternalServerError
	if e, ok := schemareg.IsRegistryError(err); ok {
		code = e.Status
	}
	c.fail(w, r, code, err)
}

type versionRow struct {
	Version, ID int32
	Type        string
	Shown       bool
}

type subjectData struct {
	Name        string
	Level       string
	GlobalLevel bool
	Mode        string
	Versions    []versionRow // newest first, this page's
	Pager
	// Shown is the version whose text the page shows.
	Shown schemareg.Registered
	Type  string
	Text  string
	// From and To fill the diff form: the version before the newest,
	// and the newest.
	From, To int32
}

// versionParam reads a version query parameter: a positive number, or
// 0 when absent.
func versionParam(r *http.Request, name string) (int32, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a version number", name, s)
	}
	return int32(n), nil
}

func (c *Console) handleSubject(w http.ResponseWriter, r *http.Request) {
	reg := c.cfg.Registry
	if reg == nil {
		c.fail(w, r, http.StatusNotFound, errRegistryOff)
		return
	}
	name := r.PathValue("subject")
	want, err := versionParam(r, "version")
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	vs, err := reg.Versions(name, false)
	if err != nil {
		c.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	if len(vs) == 0 {
		c.fail(w, r, http.StatusNotFound, fmt.Errorf("subject %q has no versions", name))
		return
	}
	if want == 0 {
		want = -1
	}
	shown, err := reg.Version(name, want, false)
	if err != nil {
		c.registryFail(w, r, err)
		return
	}
	d := subjectData{Name: name, Shown: shown, Type: typeName(shown.SchemaType), Text: schemareg.Indent(shown.Schema),
		To: vs[len(vs)-1].Version, From: vs[max(0, len(vs)-2)].Version}
	level, global, err := levelOf(reg, name)
	if err != nil {
		c.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d.Level, d.GlobalLevel = string(level), global
	if d.Mode, err = reg.ModeOf(name, false, true); err != nil {
		c.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	slices.Reverse(vs)
	rows, n, pages := pageOf(vs, r)
	d.Pager = Pager{n, pages}
	for _, sv := range rows {
		row := versionRow{Version: sv.Version, ID: sv.ID, Shown: sv.Version == shown.Version}
		if st, err := reg.ByID(sv.ID); err == nil {
			row.Type = typeName(schemareg.Type(st.SchemaType))
		}
		d.Versions = append(d.Versions, row)
	}
	c.render(w, r, http.StatusOK, "subject", page{Title: "Subject " + name, Nav: "schemas", Data: d})
}

// diffLine is one line of a diff: Kind is add, del, ctx (in both) or
// gap (unchanged lines left out); Old and New are its line numbers
// (0: not on that side).
type diffLine struct {
	Kind     string
	Old, New int
	Text     string
}

type diffData struct {
	Name     string
	From, To schemareg.Registered
	Lines    []diffLine
	Same     bool
	// TooLarge: a side has more than maxDiffLines lines.
	TooLarge           bool
	MaxLines           int
	Added, Removed     int
	FromType, ToType   string
	FromLines, ToLines int
}

func (c *Console) handleSchemaDiff(w http.ResponseWriter, r *http.Request) {
	reg := c.cfg.Registry
	if reg == nil {
		c.fail(w, r, http.StatusNotFound, errRegistryOff)
		return
	}
	name := r.PathValue("subject")
	from, err := versionParam(r, "from")
	var to int32
	if err == nil {
		to, err = versionParam(r, "to")
	}
	if err == nil && (from == 0 || to == 0) {
		err = errors.New("a diff needs two versions, from and to")
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	d := diffData{Name: name, MaxLines: maxDiffLines}
	if d.From, err = reg.Version(name, from, false); err == nil {
		d.To, err = reg.Version(name, to, false)
	}
	if err != nil {
		c.registryFail(w, r, err)
		return
	}
	d.FromType, d.ToType = typeName(d.From.SchemaType), typeName(d.To.SchemaType)
	a := strings.Split(schemareg.Indent(d.From.Schema), "\n")
	b := strings.Split(schemareg.Indent(d.To.Schema), "\n")
	d.FromLines, d.ToLines = len(a), len(b)
	switch {
	case slices.Equal(a, b):
		d.Same = true
	case len(a) > maxDiffLines || len(b) > maxDiffLines:
		d.TooLarge = true
	default:
		d.Lines, d.Added, d.Removed = lineDiff(a, b)
	}
	c.render(w, r, http.StatusOK, "schemadiff", page{Title: "Diff of " + name, Nav: "schemas", Data: d})
}

// lineDiff returns the changed lines of a to b with diffContext lines
// around each change, and how many lines were added and removed.
func lineDiff(a, b []string) (lines []diffLine, added, removed int) {
	m := difflib.NewMatcher(a, b)
	for i, group := range m.GetGroupedOpCodes(diffContext) {
		if i > 0 {
			lines = append(lines, diffLine{Kind: "gap"})
		}
		for _, op := range group {
			if op.Tag == 'e' {
				for k := range op.I2 - op.I1 {
					lines = append(lines, diffLine{Kind: "ctx", Old: op.I1 + k + 1, New: op.J1 + k + 1, Text: a[op.I1+k]})
				}
				continue
			}
			// A replacement is its old lines removed, then its new
			// ones added, as a unified diff shows it.
			if op.Tag == 'r' || op.Tag == 'd' {
				for k := op.I1; k < op.I2; k++ {
					lines = append(lines, diffLine{Kind: "del", Old: k + 1, Text: a[k]})
					removed++
				}
			}
			if op.Tag == 'r' || op.Tag == 'i' {
				for k := op.J1; k < op.J2; k++ {
					lines = append(lines, diffLine{Kind: "add", New: k + 1, Text: b[k]})
					added++
				}
			}
		}
	}
	return lines, added, removed
}
