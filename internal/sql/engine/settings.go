package engine

import (
	"slices"
	"strconv"
	"strings"

	"github.com/strandkafka/strand/internal/sql/pgwire"
	"github.com/strandkafka/strand/internal/sql/source"
)

// ServerVersion is what server_version reports: a PostgreSQL version
// (psql and drivers read the number to pick their catalog queries) with
// Strand's name after it, as PostgreSQL forks do.
const ServerVersion = "16.0 (Strand)"

// setting is one run-time parameter. Names compare case-insensitively,
// as PostgreSQL's do; name is the spelling SHOW and ParameterStatus use.
type setting struct {
	name string
	def  string
	// reported settings are sent in ParameterStatus at start and when
	// they change (PostgreSQL's GUC_REPORT set).
	reported bool
	// readOnly settings cannot be SET.
	readOnly bool
	// check normalizes a new value or refuses it; nil takes any value.
	check func(string) (string, error)
	desc  string
}

var settings = []setting{
	{name: "application_name", reported: true, desc: "Sets the application name to be reported in statistics and logs."},
	{name: "client_encoding", def: "UTF8", reported: true, check: checkEncoding, desc: "Sets the client's character set encoding."},
	{name: "DateStyle", def: "ISO, MDY", reported: true, check: checkDateStyle, desc: "Sets the display format for date and time values."},
	{name: "default_transaction_read_only", def: "off", reported: true, check: checkBool, desc: "Sets the default read-only status of new transactions."},
	{name: "extra_float_digits", def: "1", check: checkInt(-15, 3), desc: "Sets the number of digits displayed for floating-point values."},
	{name: "in_hot_standby", def: "off", reported: true, readOnly: true, desc: "Shows whether hot standby is currently active."},
	{name: "integer_datetimes", def: "on", reported: true, readOnly: true, desc: "Shows whether datetimes are integer based."},
	{name: "IntervalStyle", def: "postgres", reported: true, check: checkOnly("postgres"), desc: "Sets the display format for interval values."},
	{name: "is_superuser", def: "off", reported: true, readOnly: true, desc: "Shows whether the current user is a superuser."},
	{name: "max_identifier_length", def: "63", readOnly: true, desc: "Shows the maximum identifier length."},
	{name: "search_path", def: `"$user", public`, desc: "Sets the schema search order for names that are not schema-qualified."},
	{name: "server_encoding", def: "UTF8", reported: true, readOnly: true, desc: "Shows the server (database) character set encoding."},
	{name: "server_version", def: ServerVersion, reported: true, readOnly: true, desc: "Shows the server version."},
	{name: "server_version_num", def: "160000", readOnly: true, desc: "Shows the server version as an integer."},
	{name: "session_authorization", reported: true, readOnly: true, desc: "Sets the session user name."},
	{name: "standard_conforming_strings", def: "on", reported: true, check: checkOnly("on"), desc: "Causes '...' strings to treat backslashes literally."},
	// A source scan's limits (package source's ScanConfig): a SELECT
	// over a source reading more fails with 53400.
	{name: "strand.scan_max_bytes", def: strconv.Itoa(source.DefaultScanMaxBytes), check: checkInt(1, 1<<40), desc: "Sets the most bytes (keys and values) a SELECT may read from one source."},
	{name: "strand.scan_max_rows", def: strconv.Itoa(source.DefaultScanMaxRows), check: checkInt(1, 1<<30), desc: "Sets the most records a SELECT may read from one source (rows kept, for an upsert source)."},
	// A subscription's queue (package views): a SUBSCRIBE whose client
	// leaves more changes unread ends with 53400.
	{name: "strand.subscribe_max_changes", def: "100000", check: checkInt(1, 1<<30), desc: "Sets the most changes a SUBSCRIBE may hold unread before it is ended."},
	// How a read of a materialized view waits (package views'
	// WaitCaughtUp): "prefix" reads this agent's copy as it stands,
	// "caught_up" waits, up to strand.view_wait_timeout_ms, for it to
	// reach the inputs' last stable offsets as the read began.
	{name: "strand.view_consistency", def: "prefix", check: checkOneOf("prefix", "caught_up"), desc: "Sets whether a read of a materialized view first waits for this agent's copy to catch up with its inputs (caught_up) or reads it as it stands (prefix)."},
	{name: "strand.view_wait_timeout_ms", def: "30000", check: checkInt(1, 3_600_000), desc: "Sets how long a caught_up read of a materialized view waits for it to catch up before failing with 57014."},
	{name: "TimeZone", def: "UTC", reported: true, check: checkTimeZone, desc: "Sets the time zone for displaying and interpreting time stamps."},
	{name: "transaction_isolation", def: "read committed", readOnly: true, desc: "Sets the current transaction's isolation level."},
}

func lookupSetting(name string) (*setting, bool) {
	for i := range settings {
		if strings.EqualFold(settings[i].name, name) {
			return &settings[i], true
		}
	}
	return nil, false
}

func checkEncoding(v string) (string, error) {
	switch strings.ToUpper(strings.ReplaceAll(v, "-", "")) {
	case "UTF8", "UNICODE":
		return "UTF8", nil
	case "SQL_ASCII":
		// What psql asks for under the C locale: bytes pass unchanged,
		// which UTF-8 output satisfies.
		return "SQL_ASCII", nil
	}
	return "", pgwire.NotSupported("client_encoding %q is not supported: Strand speaks UTF8", v)
}

func checkDateStyle(v string) (string, error) {
	parts := strings.FieldsFunc(strings.ToUpper(v), func(r rune) bool { return r == ',' || r == ' ' })
	for _, p := range parts {
		if p != "ISO" && p != "MDY" {
			return "", pgwire.NotSupported("DateStyle %q is not supported: only ISO, MDY", v)
		}
	}
	return "ISO, MDY", nil
}

func checkTimeZone(v string) (string, error) {
	switch strings.ToUpper(v) {
	case "UTC", "ETC/UTC", "GMT", "Z", "ZULU", "UCT", "ETC/UCT", "ETC/GMT":
		return "UTC", nil
	}
	return "", pgwire.NotSupported("TimeZone %q is not supported yet: only UTC", v)
}

func checkBool(v string) (string, error) {
	b, ok := parseBool(v)
	if !ok {
		return "", pgwire.Errorf(pgwire.CodeInvalidParameterValue, "parameter requires a Boolean value")
	}
	if b {
		return "on", nil
	}
	return "off", nil
}

func checkInt(lo, hi int) func(string) (string, error) {
	return func(v string) (string, error) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return "", pgwire.Errorf(pgwire.CodeInvalidParameterValue, "invalid value %q: want an integer", v)
		}
		if n < lo || n > hi {
			return "", pgwire.Errorf(pgwire.CodeInvalidParameterValue, "%d is outside the valid range (%d .. %d)", n, lo, hi)
		}
		return strconv.Itoa(n), nil
	}
}

func checkOneOf(allowed ...string) func(string) (string, error) {
	return func(v string) (string, error) {
		for _, a := range allowed {
			if strings.EqualFold(strings.TrimSpace(v), a) {
				return a, nil
			}
		}
		return "", pgwire.Errorf(pgwire.CodeInvalidParameterValue, "invalid value %q: want one of %s", v, strings.Join(allowed, ", "))
	}
}

func checkOnly(allowed string) func(string) (string, error) {
	return func(v string) (string, error) {
		if !strings.EqualFold(v, allowed) {
			return "", pgwire.NotSupported("value %q is not supported: only %s", v, allowed)
		}
		return allowed, nil
	}
}

// values is one session's settings. Custom settings (a dotted name, as
// PostgreSQL's extensions use) are kept as given.
type values struct {
	cur    map[string]string // by setting name as spelled in settings
	custom map[string]string // by lower-cased name
	client pgwire.Client
}

func newValues(user string, client pgwire.Client) *values {
	v := &values{cur: make(map[string]string), custom: make(map[string]string), client: client}
	for _, s := range settings {
		v.cur[s.name] = s.def
	}
	v.cur["session_authorization"] = user
	return v
}

// reportAll sends every reported setting, as at connection start.
func (v *values) reportAll() {
	for _, s := range settings {
		if s.reported {
			v.client.ParameterStatus(s.name, v.cur[s.name])
		}
	}
}

// set sets name to value (value "" with reset: its default).
func (v *values) set(name, value string, reset bool) error {
	s, ok := lookupSetting(name)
	if !ok {
		if strings.Contains(name, ".") {
			if reset {
				delete(v.custom, strings.ToLower(name))
			} else {
				v.custom[strings.ToLower(name)] = value
			}
			return nil
		}
		return pgwire.Errorf(pgwire.CodeUndefinedObject, "unrecognized configuration parameter %q", name)
	}
	if s.readOnly {
		return pgwire.Errorf("55P02", "parameter %q cannot be changed", s.name)
	}
	if reset {
		value = s.def
	} else if s.check != nil {
		var err error
		if value, err = s.check(value); err != nil {
			return err
		}
	}
	if v.cur[s.name] != value {
		v.cur[s.name] = value
		if s.reported {
			v.client.ParameterStatus(s.name, value)
		}
	}
	return nil
}

func (v *values) resetAll() {
	for _, s := range settings {
		if !s.readOnly {
			v.set(s.name, "", true)
		}
	}
	clear(v.custom)
}

// get returns name's value and its canonical name.
func (v *values) get(name string) (value, canonical string, err error) {
	if s, ok := lookupSetting(name); ok {
		return v.cur[s.name], s.name, nil
	}
	if c, ok := v.custom[strings.ToLower(name)]; ok {
		return c, strings.ToLower(name), nil
	}
	return "", "", pgwire.Errorf(pgwire.CodeUndefinedObject, "unrecognized configuration parameter %q", name)
}

// all is SHOW ALL's rows: name, setting, description, by name.
func (v *values) all() [][]any {
	var rows [][]any
	for _, s := range settings {
		rows = append(rows, []any{s.name, v.cur[s.name], s.desc})
	}
	for k, c := range v.custom {
		rows = append(rows, []any{k, c, ""})
	}
	slices.SortFunc(rows, func(a, b []any) int {
		return strings.Compare(strings.ToLower(a[0].(string)), strings.ToLower(b[0].(string)))
	})
	return rows
}

// parseBool is PostgreSQL's boolean input: any unique prefix of true,
// false, yes, no; on, off; 1, 0.
func parseBool(s string) (bool, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return false, false
	}
	switch s {
	case "1", "on":
		return true, true
	case "0", "of", "off":
		return false, true
	}
	for _, w := range []string{"true", "yes"} {
		if strings.HasPrefix(w, s) {
			return true, true
		}
	}
	for _, w := range []string{"false", "no"} {
		if strings.HasPrefix(w, s) {
			return false, true
		}
	}
	return false, false
}
