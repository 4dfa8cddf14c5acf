// Package console owns the agent's web console: server-rendered pages
// under /console/ on the agent's HTTP port showing the cluster (agents,
// the shared log's chain, snapshots), topics, a partition's records,
// consumer groups and live throughput, with forms that create, delete
// and reconfigure topics and reset a group's offsets; and the schema
// registry's subjects, versions and diffs of them (schemas.go); and SQL
// (sql.go): the catalog's relations and views' lag, and a query form;
// and the connectors with their status (connectors.go); SCRAM users,
// ACLs and client quotas with forms to change them (security.go); a
// search across a topic's partitions (search.go) and a form that
// produces a record (produce.go).
//
// Topic, record and group data come through Kafka, as any Kafka UI gets
// them: kadm and kgo clients whose connections Config.Kafka routes (the
// agent serves them in process, as a principal its authorizer treats as
// a super user, so the console needs no credentials of its own whatever
// TLS, SASL and ACLs the listeners demand). The cluster page reads the
// agent's own status (Config.Cluster), the one the admin API's
// /v1/log/status serves.
//
// Who may see a page or submit a form is what Config.Authorize decides
// (the agent asks for a super user, as the pages read as one): the admin
// bearer token, which the login page keeps in an HttpOnly,
// SameSite=Strict cookie; a client certificate of a super user; or a
// request addressed to this machine's own name on a loopback-only agent
// without a token. Only the login page and the static files are open.
// Every form also needs the request's Origin (or Referer) to be the
// console's own, so another site cannot submit it from a logged-in
// browser.
package console

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/schemareg"
)

// Prefix is where the console lives on the HTTP port.
const Prefix = "/console/"

// Bounds. Every Kafka call has kafkaTimeout; every list is paged.
const (
	kafkaTimeout = 10 * time.Second
	// pageSize is how many topics or groups a list page shows.
	pageSize = 50
	// maxRecordsPerPage and maxRecordPageBytes bound one page of
	// records; maxShownBytes bounds how much of one key, value or header
	// value is rendered.
	maxRecordsPerPage  = 100
	maxRecordPageBytes = 1 << 20
	maxShownBytes      = 16 << 10
	// maxRecordFetchBytes bounds one fetch of a records page (a record
	// batch larger than it still comes whole, as Kafka sends the first
	// one anyway); maxRecordReaders bounds the records pages read at
	// once, each with a client of its own, and recordReaderWait how long
	// a page waits for its turn.
	maxRecordFetchBytes = 256 << 10
	maxRecordReaders    = 4
	recordReaderWait    = 5 * time.Second
	// maxLagRows bounds the partitions one group page lists.
	maxLagRows = 1000
	// maxFormBytes bounds a form body.
	maxFormBytes = 64 << 10
)

// Cluster is what the console reads about the agent it runs in. The
// agent implements it from the data its admin API serves.
type Cluster interface {
	ClusterStatus(ctx context.Context) (ClusterStatus, error)
}

// ClusterStatus is the cluster as the answering agent's copy sees it.
type ClusterStatus struct {
	// NodeID, WriterID, Incarnation and Applied are the answering
	// agent's; Applied is the next log position it applies.
	NodeID      int32
	WriterID    string
	Incarnation uint64
	Applied     uint64
	// Tail is the position the next log entry takes; Sealed says the
	// active segment was found sealed (a migration is under way).
	Tail      uint64
	Sealed    bool
	TrimPoint uint64
	// ChainVersion and Segments are the shared log's chain.
	ChainVersion uint64
	Segments     []Segment
	// Agents is the replicated agent table, by node id.
	Agents []Agent
	// Snapshot is the newest metadata snapshot, nil if there is none or
	// SnapshotError says why it is unknown.
	Snapshot      *Snapshot
	SnapshotError string
}

// Agent is one agent of the replicated agent table.
type Agent struct {
	NodeID  int32
	AgentID string
	// Listeners are its advertised Kafka listeners, "NAME host:port".
	Listeners []string
	// Applied is the applied position its newest lease renewal carried.
	Applied uint64
	Expires time.Time
	Live    bool
}

// Segment is one segment of the log chain: positions [Start, End).
type Segment struct {
	Start, End uint64
	Sealed     bool
	URL        string // secrets redacted
}

// Snapshot is a metadata snapshot in the object store.
type Snapshot struct {
	Pos       uint64
	Key       string
	CreatedAt time.Time
	Files     int
	Bytes     int64
}

// Config configures a Console.
type Config struct {
	Cluster Cluster
	// Kafka are the options every Kafka client of the console starts
	// from: seed brokers and the dialer that reaches the agent.
	Kafka []kgo.Opt
	// Authorize decides whether r may see the console's pages and
	// submit its forms: nil, or the HTTP status and the reason to
	// refuse it. It reads the bearer token from the Authorization
	// header, where the console puts the login cookie's token.
	Authorize func(r *http.Request) (int, error)
	// Throughput returns the bytes received in Produce requests and
	// sent in Fetch responses since the agent started.
	Throughput func() (in, out uint64)
	// Registry is the agent's schema registry, which the Schemas pages
	// read; nil (the agent serves none): they say the registry is off.
	Registry *schemareg.Registry
	// SQL is the agent's SQL endpoint, which the SQL page lists and
	// queries; nil (no --sql-listen): the page says SQL is off.
	SQL SQL
	// Connectors lists the connectors r's caller may see, with their
	// status (connectors.go); nil: the page lists none.
	Connectors func(r *http.Request) ([]Connector, error)
	// Metrics is the agent's metrics registry; the share group page
	// shows its strand_share_ series. nil: the page says so.
	Metrics prometheus.Gatherer
	// ShareCounts reads a share group's partitions from the agent's copy
	// of the metadata: the in-window record counts by state, which no
	// Kafka API carries. nil: the share group page shows "–" for them.
	ShareCounts func(group string) (ShareCounts, error)
	Logger      *slog.Logger
	// Clock times the throughput samples (cluster.go); nil: the wall
	// clock. ThroughputSampleEvery is their spacing; zero: 10 s.
	Clock                 clock.Clock
	ThroughputSampleEvery time.Duration
}

//go:embed templates static
var assets embed.FS

// Console serves the web console. Create it with New; Close it when the
// agent stops.
type Console struct {
	cfg   Config
	cl    *kgo.Client
	adm   *kadm.Client
	pages map[string]*template.Template
	mux   *http.ServeMux
	// recordReaders holds a token per records page being read; a page
	// waits recordReaderWait for one.
	recordReaders    chan struct{}
	recordReaderWait time.Duration
	// history is the throughput chart's past, sampled every sampleEvery
	// on clock from New to Close.
	clock       clock.Clock
	sampleEvery time.Duration
	history     throughputHistory
}

// New returns a console; its Kafka client connects lazily, at the first
// page that needs it.
func New(cfg Config) (*Console, error) {
	if cfg.Cluster == nil || cfg.Authorize == nil || cfg.Throughput == nil {
		return nil, errors.New("console: Cluster, Authorize and Throughput are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cl, err := kgo.NewClient(append(cfg.Kafka[:len(cfg.Kafka):len(cfg.Kafka)],
		kgo.ClientID("strand-console"), kgo.RequestTimeoutOverhead(kafkaTimeout),
		// The offsets of a topic created a moment ago must not come
		// from a cache that says it does not exist.
		kgo.MetadataMinAge(10*time.Millisecond))...)
	if err != nil {
		return nil, fmt.Errorf("console: kafka client: %w", err)
	}
	c := &Console{cfg: cfg, cl: cl, adm: kadm.NewClient(cl), pages: map[string]*template.Template{},
		recordReaders: make(chan struct{}, maxRecordReaders), recordReaderWait: recordReaderWait,
		clock: clock.OrReal(cfg.Clock), sampleEvery: cmp.Or(cfg.ThroughputSampleEvery, throughputSampleEvery)}
	for _, p := range []string{"cluster", "topics", "topic", "records", "search", "users", "acls", "quotas", "groups", "group", "sharegroup", "schemas", "subject", "schemadiff", "sql", "connectors", "login", "message"} {
		t, err := template.New(p).Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+p+".html")
		if err != nil {
			cl.Close()
			return nil, fmt.Errorf("console: template %s: %w", p, err)
		}
		c.pages[p] = t
	}
	c.routes()
	c.sample()
	return c, nil
}

// Close stops the throughput samples and closes the console's Kafka
// client.
func (c *Console) Close() {
	c.history.stop()
	c.cl.Close()
}

// ServeHTTP serves the paths under Prefix.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.mux.ServeHTTP(w, r) }

func (c *Console) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	m.Handle("GET "+Prefix+"static/", http.StripPrefix(Prefix+"static/", http.FileServerFS(static)))
	m.HandleFunc("GET "+Prefix+"{$}", c.authorized(c.handleCluster))
	m.HandleFunc("GET "+Prefix+"api/throughput", c.authorized(c.handleThroughput))
	m.HandleFunc("GET "+Prefix+"topics", c.authorized(c.handleTopics))
	m.HandleFunc("POST "+Prefix+"topics", c.admin(c.handleCreateTopic))
	m.HandleFunc("GET "+Prefix+"topics/{topic}", c.authorized(c.handleTopic))
	m.HandleFunc("POST "+Prefix+"topics/{topic}/delete", c.admin(c.handleDeleteTopic))
	m.HandleFunc("POST "+Prefix+"topics/{topic}/config", c.admin(c.handleAlterConfig))
	m.HandleFunc("GET "+Prefix+"topics/{topic}/records", c.authorized(c.handleRecords))
	m.HandleFunc("GET "+Prefix+"topics/{topic}/search", c.authorized(c.handleSearch))
	m.HandleFunc("POST "+Prefix+"topics/{topic}/produce", c.admin(c.handleProduce))
	m.HandleFunc("GET "+Prefix+"groups", c.authorized(c.handleGroups))
	m.HandleFunc("GET "+Prefix+"groups/{group}", c.authorized(c.handleGroup))
	m.HandleFunc("POST "+Prefix+"groups/{group}/reset", c.admin(c.handleResetOffsets))
	m.HandleFunc("GET "+Prefix+"users", c.authorized(c.handleUsers))
	m.HandleFunc("POST "+Prefix+"users", c.admin(c.handleUpsertUser))
	m.HandleFunc("POST "+Prefix+"users/delete", c.admin(c.handleDeleteUser))
	m.HandleFunc("GET "+Prefix+"acls", c.authorized(c.handleACLs))
	m.HandleFunc("POST "+Prefix+"acls", c.admin(c.handleCreateACL))
	m.HandleFunc("POST "+Prefix+"acls/delete", c.admin(c.handleDeleteACL))
	m.HandleFunc("GET "+Prefix+"quotas", c.authorized(c.handleQuotas))
	m.HandleFunc("POST "+Prefix+"quotas", c.admin(c.handleAlterQuota))
	m.HandleFunc("GET "+Prefix+"schemas", c.authorized(c.handleSchemas))
	m.HandleFunc("GET "+Prefix+"schemas/{subject}", c.authorized(c.handleSubject))
	m.HandleFunc("GET "+Prefix+"schemas/{subject}/diff", c.authorized(c.handleSchemaDiff))
	m.HandleFunc("GET "+Prefix+"sql", c.authorized(c.handleSQL))
	m.HandleFunc("POST "+Prefix+"sql", c.admin(c.handleRunSQL))
	m.HandleFunc("GET "+Prefix+"connectors", c.authorized(c.handleConnectors))
	m.HandleFunc("GET "+Prefix+"login", c.handleLoginPage)
	m.HandleFunc("POST "+Prefix+"login", c.sameOrigin(c.handleLogin))
	m.HandleFunc("POST "+Prefix+"logout", c.sameOrigin(c.handleLogout))
	c.mux = m
}

// page is what every template gets.
type page struct {
	Title string
	// Nav names the section the page belongs to, for the menu.
	Nav string
	// Msg is a notice from the action that redirected here.
	Msg  string
	Data any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	if p.Msg == "" {
		p.Msg = r.URL.Query().Get("msg")
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// Only the console's own files; no inline script.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	var b strings.Builder
	if err := c.pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		c.cfg.Logger.Error("console: rendering", "page", name, "err", err)
		http.Error(w, "rendering the page failed", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(code)
	w.Write([]byte(b.String()))
}

// fail renders a message page for an error.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	c.render(w, r, code, "message", page{Title: http.StatusText(code), Data: messageData{Code: code, Err: err.Error()}})
}

type messageData struct {
	Code int
	Err  string
	// Login: the refusal was for want of the admin token.
	Login bool
	Next  string
}

// done redirects to to with a notice (post, redirect, get).
func done(w http.ResponseWriter, r *http.Request, to, msg string) {
	http.Redirect(w, r, to+"?msg="+url.QueryEscape(msg), http.StatusSeeOther)
}

// kafkaCtx bounds one page's Kafka calls. It also makes kadm's topic
// listings ask the agent rather than kgo's metadata cache (asking for the
// authorized operations bypasses it), so a page shows a topic the moment
// a form created or deleted it.
func kafkaCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(kadm.WithAuthorizedOps(r.Context()), kafkaTimeout)
}

// pageOf returns the items of page n (from 1) of items, and the number
// of pages.
func pageOf[T any](items []T, r *http.Request) (_ []T, n, pages int) {
	n, _ = strconv.Atoi(r.URL.Query().Get("page"))
	pages = max(1, (len(items)+pageSize-1)/pageSize)
	n = min(max(n, 1), pages)
	lo := (n - 1) * pageSize
	return items[lo:min(lo+pageSize, len(items))], n, pages
}

// Pager is the paging links' data.
type Pager struct {
	Page, Pages int
}

func (p Pager) Prev() int { return p.Page - 1 }
func (p Pager) Next() int {
	if p.Page >= p.Pages {
		return 0
	}
	return p.Page + 1
}

var funcs = template.FuncMap{
	"bytes": FormatBytes,
	"time": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"ms": func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000") },
	"pe": url.PathEscape,
	// quoteIdent is a SQL name as PostgreSQL's quote_ident writes it
	// (the SQL page's EXPLAIN buttons).
	"quoteIdent": quoteIdent,
	// ops are the ACL operations a binding can name (not ANY, UNKNOWN).
	"ops": func() []string {
		return []string{"ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
			"DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"}
	},
}

func quoteIdent(name string) string {
	plain := name != ""
	for i, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			plain = false
		}
	}
	if plain {
		return name
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// FormatBytes shows n in binary units, as the console's pages do.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
