// The SQL page: the catalog's sources, materialized views (their
// status, lag, epochs and state size on this agent) and sinks, and a
// form that runs a query through the agent's SQL endpoint's own catalog
// and engine, as the console's caller (Config.SQL). Rows shown are
// bounded (maxSQLRows, each value maxShownBytes); a result cut says so.

package console

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
)

const (
	// maxSQLRows bounds the rows the SQL page shows of a result; a
	// query with more is cut, with a notice.
	maxSQLRows = 1000
	// sqlTimeout bounds one query run from the page.
	sqlTimeout = 30 * time.Second
)

// SQL is what the SQL page needs of the agent's SQL endpoint. The
// agent implements it over the endpoint's catalog and engine.
type SQL interface {
	// Relations lists the catalog's relations r's caller may describe,
	// with each materialized view's state on this agent.
	Relations(r *http.Request) ([]SQLRelation, error)
	// Run runs the statements of query in one session, as r's caller
	// (its ACLs), returning each statement's result with at most
	// maxRows rows. An error stops the run; the results before it are
	// returned with it. A *SQLError carries the SQLSTATE.
	Run(ctx context.Context, r *http.Request, query string, maxRows int) ([]SQLResult, error)
}

// SQLRelation is one relation of the catalog.
type SQLRelation struct {
	// Kind is "source", "materialized view" or "sink".
	Kind                string
	Name, Topic, Format string
	// Reads names the relations a view or sink reads.
	Reads string
	// For a view: its state here ("starting", "running", "failed: ..."),
	// committed epochs, lag (records -1 and state -1 until measured),
	// changes to its contents per second, late and bad input records.
	Status           string
	Epochs           uint64
	LagRecords       int64
	LagSeconds       float64
	StateBytes       int64
	UpdatesPerSecond float64
	Late, Bad        uint64
}

// SQLResult is one statement's result.
type SQLResult struct {
	Columns []string
	// Rows are the values as PostgreSQL's text format shows them; a
	// NULL is Null[i][j].
	Rows [][]string
	Null [][]bool
	// Cut: the statement returned more than the rows shown.
	Cut bool
	// Tag is its command tag ("SELECT 3", "CREATE SOURCE").
	Tag     string
	Notices []string
}

// SQLError is a failed statement as PostgreSQL reports it.
type SQLError struct {
	Code, Message, Detail, Hint string
}

func (e *SQLError) Error() string { return e.Code + ": " + e.Message }

type sqlData struct {
	Off                   bool
	Query                 string
	Sources, Views, Sinks []SQLRelation
	ListErr               string
	Results               []SQLResult
	Err                   *SQLError
	MaxRows               int
	Ran                   bool
}

func (c *Console) handleSQL(w http.ResponseWriter, r *http.Request) {
	c.renderSQL(w, r, sqlData{})
}

// handleRunSQL runs the form's query and shows its results on the page
// (not a redirect: the result is the answer). It is a form, same-origin
// and authorized as the others, since a statement may change the
// catalog.
func (c *Console) handleRunSQL(w http.ResponseWriter, r *http.Request) {
	d := sqlData{Query: r.PostFormValue("q"), Ran: true}
	if c.cfg.SQL != nil && strings.TrimSpace(d.Query) != "" {
		ctx, cancel := context.WithTimeout(r.Context(), sqlTimeout)
		defer cancel()
		res, err := c.cfg.SQL.Run(ctx, withCookieToken(r), d.Query, maxSQLRows)
		d.Results = res
		if err != nil {
			var se *SQLError
			if !errors.As(err, &se) {
				se = &SQLError{Code: "XX000", Message: err.Error()}
			}
			d.Err = se
		}
	}
	c.renderSQL(w, r, d)
}

func (c *Console) renderSQL(w http.ResponseWriter, r *http.Request, d sqlData) {
	d.MaxRows = maxSQLRows
	if c.cfg.SQL == nil {
		d.Off = true
		c.render(w, r, http.StatusOK, "sql", page{Title: "SQL", Nav: "sql", Data: d})
		return
	}
	rels, err := c.cfg.SQL.Relations(withCookieToken(r))
	if err != nil {
		d.ListErr = err.Error()
	}
	for _, rel := range rels {
		switch rel.Kind {
		case "source":
			d.Sources = append(d.Sources, rel)
		case "materialized view":
			d.Views = append(d.Views, rel)
		default:
			d.Sinks = append(d.Sinks, rel)
		}
	}
	c.render(w, r, http.StatusOK, "sql", page{Title: "SQL", Nav: "sql", Data: d})
}
