package compat

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Capability is one column of the matrix.
type Capability string

// The columns, in print order.
const (
	Produce      Capability = "produce"
	Consume      Capability = "consume"
	Gzip         Capability = "gzip"
	Snappy       Capability = "snappy"
	LZ4          Capability = "lz4"
	Zstd         Capability = "zstd"
	Groups       Capability = "groups"
	OffsetCommit Capability = "offset-commit"
	Idempotence  Capability = "idempotence"
	Transactions Capability = "transactions"
	Admin        Capability = "admin"
	// ShareGroups is KIP-932's share groups (queues): the kgo suite's
	// share consumer tests.
	ShareGroups Capability = "share-groups"
	// Lag is consumer lag as a monitoring tool (burrow) reports it.
	Lag Capability = "lag"
	// The security columns: a produce and consume (or, for the kgo
	// suite, its tests for the mechanism) over SASL_PLAINTEXT with
	// PLAIN, SASL_PLAINTEXT with SCRAM-SHA-256, SASL_SSL with
	// SCRAM-SHA-512, and SSL with a client certificate (security.go).
	SASLPlain   Capability = "sasl-plain"
	ScramSHA256 Capability = "scram-sha-256"
	ScramSHA512 Capability = "scram-sha-512"
	MTLS        Capability = "mtls"
)

// Capabilities lists every column in print order.
var Capabilities = []Capability{Produce, Consume, Gzip, Snappy, LZ4, Zstd, Groups, OffsetCommit, Idempotence, Transactions, Admin, ShareGroups, Lag,
	SASLPlain, ScramSHA256, ScramSHA512, MTLS}

// SecurityCaps are the columns checked over a secured listener rather
// than by the client scripts' own checks.
var SecurityCaps = []Capability{SASLPlain, ScramSHA256, ScramSHA512, MTLS}

// Implemented lists the capabilities Strand serves today: a failing cell
// in one of these columns is a regression, and TestQuickMatrix and
// strand-compat -strict fail on it.
var Implemented = []Capability{Produce, Consume, Gzip, Snappy, LZ4, Zstd, Groups, OffsetCommit, Idempotence, Transactions, Admin, ShareGroups, Lag,
	SASLPlain, ScramSHA256, ScramSHA512, MTLS}

// codecs maps the compression columns to the codec numbers in a record
// batch's attributes.
var codecs = map[Capability]int8{Gzip: 1, Snappy: 2, LZ4: 3, Zstd: 4}

// Status is a cell's verdict.
type Status string

const (
	Pass Status = "pass"
	Fail Status = "fail"
	// NA: the client cannot do this at all (no such feature, or a tool
	// it needs cannot run here); Detail says why.
	NA Status = "n/a"
)

// Cell is one client's verdict on one capability.
type Cell struct {
	Status Status `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Row is one client's line of the matrix. A capability missing from
// Cells was not tested (the quick subset tests only some).
type Row struct {
	Client  string              `json:"client"`
	Version string              `json:"version,omitempty"`
	Cells   map[Capability]Cell `json:"cells"`
	Notes   []string            `json:"notes,omitempty"`
	Elapsed time.Duration       `json:"elapsed_ns"`
}

// set records c for capability cp, keeping an earlier failure: a
// capability several checks feed fails if any of them does.
func (r *Row) set(cp Capability, c Cell) {
	if r.Cells == nil {
		r.Cells = make(map[Capability]Cell)
	}
	if old, ok := r.Cells[cp]; ok && old.Status == Fail && c.Status != Fail {
		return
	}
	r.Cells[cp] = c
}

// Matrix is the result of one run.
type Matrix struct {
	Started time.Time     `json:"started"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Agent is the strand build the clients ran against.
	Agent string `json:"agent"`
	Quick bool   `json:"quick"`
	Rows  []Row  `json:"rows"`
	// Kgo is the franz-go suite's detail; its cells are also a Row.
	Kgo *KgoReport `json:"kgo,omitempty"`
}

// Row returns the row of client, or nil.
func (m *Matrix) Row(client string) *Row {
	for i := range m.Rows {
		if m.Rows[i].Client == client {
			return &m.Rows[i]
		}
	}
	return nil
}

// Regressions lists the failing cells of implemented capabilities, one
// "client capability: detail" line each.
func (m *Matrix) Regressions() []string {
	var out []string
	for _, r := range m.Rows {
		for _, cp := range Capabilities {
			c, ok := r.Cells[cp]
			if ok && c.Status == Fail && slices.Contains(Implemented, cp) {
				out = append(out, fmt.Sprintf("%s %s: %s", r.Client, cp, c.Detail))
			}
		}
	}
	return out
}

// WriteJSON writes m as indented JSON.
func (m *Matrix) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(m)
}

// WriteTable prints the matrix as a text table (PASS, FAIL, n/a; "-" for
// not tested), then every FAIL and n/a cell with its reason, then the
// kgo suite's summary and failing tests.
func (m *Matrix) WriteTable(w io.Writer) {
	cols := make([]string, 0, len(Capabilities))
	for _, cp := range Capabilities {
		cols = append(cols, string(cp))
	}
	header := append([]string{"client"}, cols...)
	rows := [][]string{header}
	for _, r := range m.Rows {
		line := []string{r.Client}
		for _, cp := range Capabilities {
			c, ok := r.Cells[cp]
			switch {
			case !ok:
				line = append(line, "-")
			case c.Status == Pass:
				line = append(line, "PASS")
			case c.Status == Fail:
				line = append(line, "FAIL")
			default:
				line = append(line, "n/a")
			}
		}
		rows = append(rows, line)
	}
	widths := make([]int, len(header))
	for _, row := range rows {
		for i, s := range row {
			widths[i] = max(widths[i], len(s))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, s := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			fmt.Fprintf(&b, "%-*s", widths[i], s)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	fmt.Fprintln(w)
	for _, r := range m.Rows {
		v := r.Version
		if v != "" {
			v = " " + v
		}
		for _, cp := range Capabilities {
			c, ok := r.Cells[cp]
			if ok && c.Status != Pass {
				fmt.Fprintf(w, "%s %s%s %s: %s\n", strings.ToUpper(string(c.Status)), r.Client, v, cp, c.Detail)
			}
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "note %s: %s\n", r.Client, n)
		}
	}
	if m.Kgo != nil {
		fmt.Fprintln(w)
		m.Kgo.WriteSummary(w)
	}
}
