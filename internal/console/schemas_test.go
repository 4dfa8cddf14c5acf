package console_test

import (
	"context"
	"errors"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/console"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/schemareg"
	"github.com/strandkafka/strand/internal/schemareg/avroschema"
	"github.com/strandkafka/strand/internal/schemareg/jsonschema"
	"github.com/strandkafka/strand/internal/schemareg/protoschema"
)

// Two versions of an Avro schema whose doc holds markup: version 2
// drops the field old and adds note.
const (
	orderV1 = `{"type":"record","name":"Order","doc":"<script>alert('v1')</script>","fields":[{"name":"id","type":"long"},{"name":"old","type":"int","default":0}]}`
	orderV2 = `{"type":"record","name":"Order","doc":"<script>alert('v1')</script>","fields":[{"name":"id","type":"long"},{"name":"note","type":"string","default":""}]}`
)

type noCluster struct{}

func (noCluster) ClusterStatus(context.Context) (console.ClusterStatus, error) {
	return console.ClusterStatus{}, nil
}

// newRegistry returns a registry over an in-memory metadata copy.
func newRegistry(t *testing.T) *schemareg.Registry {
	t.Helper()
	db := metatest.New(nil)
	db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel6}}})
	return schemareg.New(db, avroschema.Format{}, protoschema.Format{}, jsonschema.Format{})
}

func register(t *testing.T, reg *schemareg.Registry, subject string, req schemareg.RegisterRequest) {
	t.Helper()
	if _, err := reg.Register(context.Background(), subject, req, false); err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
}

// schemaConsole serves a console over reg (nil: none) whose Authorize is
// authz; its Kafka client is never used by the Schemas pages.
func schemaConsole(t *testing.T, reg *schemareg.Registry, authz func(*http.Request) (int, error)) string {
	t.Helper()
	c, err := console.New(console.Config{
		Cluster:    noCluster{},
		Kafka:      []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")},
		Authorize:  authz,
		Throughput: func() (uint64, uint64) { return 0, 0 },
		Registry:   reg,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return srv.URL
}

func allowAll(*http.Request) (int, error) { return 0, nil }

func getURL(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := noRedirects.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var (
	rowRE   = regexp.MustCompile(`(?s)<tr>\s*<td><a href="/console/schemas/[^"]*">([^<]*)</a>.*?</tr>`)
	cellRE  = regexp.MustCompile(`<td[^>]*>(.*?)</td>`)
	tagRE   = regexp.MustCompile(`<[^>]+>`)
	lineRE  = regexp.MustCompile(`<tr class="(add|del|ctx)">.*?<code>(.*?)</code></td></tr>`)
	spaceRE = regexp.MustCompile(`\s+`)
)

// subjectRows returns the subjects table's rows as their cells' text.
func subjectRows(body string) [][]string {
	var out [][]string
	for _, m := range rowRE.FindAllString(body, -1) {
		var cells []string
		for _, c := range cellRE.FindAllStringSubmatch(m, -1) {
			cells = append(cells, strings.TrimSpace(spaceRE.ReplaceAllString(html.UnescapeString(tagRE.ReplaceAllString(c[1], " ")), " ")))
		}
		out = append(out, cells)
	}
	return out
}

// diffLines returns the diff table's lines of kind (add, del, ctx),
// unescaped.
func diffLines(body, kind string) []string {
	var out []string
	for _, m := range lineRE.FindAllStringSubmatch(body, -1) {
		if m[1] == kind {
			out = append(out, html.UnescapeString(m[2]))
		}
	}
	return out
}

// TestConsoleSchemas: the Schemas page lists each subject with its
// latest version, id, type and level; a subject's page lists its
// versions and shows one's text, escaped; the diff of two versions
// shows the lines removed and added.
func TestConsoleSchemas(t *testing.T) {
	reg := newRegistry(t)
	register(t, reg, "orders-value", schemareg.RegisterRequest{Schema: orderV1})
	register(t, reg, "orders-value", schemareg.RegisterRequest{Schema: orderV2})
	register(t, reg, "events", schemareg.RegisterRequest{SchemaType: schemareg.TypeProtobuf, Schema: "syntax = \"proto3\";\nmessage Event { int64 at = 1; }\n"})
	register(t, reg, "events", schemareg.RegisterRequest{SchemaType: schemareg.TypeProtobuf, Schema: "syntax = \"proto3\";\nmessage Event { int64 at = 1; string kind = 2; }\n"})
	if _, err := reg.Delete(context.Background(), "events", 1, false); err != nil {
		t.Fatal(err)
	}
	setLevel(t, reg, "orders-value", "NONE")
	base := schemaConsole(t, reg, allowAll)

	code, body := getURL(t, base+"/console/schemas")
	if code != http.StatusOK {
		t.Fatalf("schemas page: %d: %s", code, body)
	}
	want := [][]string{
		{"events", "2", "1", "4", "PROTOBUF", "BACKWARD global"},
		{"orders-value", "2", "2", "2", "AVRO", "NONE"},
	}
	if got := subjectRows(body); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("subjects table %q, want %q", got, want)
	}
	if !strings.Contains(body, `id="global-level">BACKWARD<`) {
		t.Error("the page does not show the global level BACKWARD")
	}

	code, body = getURL(t, base+"/console/schemas/orders-value?version=1")
	if code != http.StatusOK {
		t.Fatalf("subject page: %d: %s", code, body)
	}
	for _, v := range []string{">1</td><td class=\"n\">1</td><td>AVRO", ">2</td><td class=\"n\">2</td><td>AVRO"} {
		if !strings.Contains(body, v) {
			t.Errorf("subject page lacks the version row %q", v)
		}
	}
	if strings.Contains(body, "<script>alert") {
		t.Error("the subject page holds the schema's <script> unescaped")
	}
	shown := regexp.MustCompile(`(?s)<pre class="schema" id="schema">(.*?)</pre>`).FindStringSubmatch(body)
	stored, err := reg.Version("orders-value", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(shown) != 2 || html.UnescapeString(shown[1]) != schemareg.Indent(stored.Schema) || !strings.Contains(shown[1], "&lt;script&gt;") {
		t.Errorf("the page shows %q, want version 1's text indented and escaped", shown)
	}

	code, body = getURL(t, base+"/console/schemas/orders-value/diff?from=1&to=2")
	if code != http.StatusOK {
		t.Fatalf("diff page: %d: %s", code, body)
	}
	if del, add := diffLines(body, "del"), diffLines(body, "add"); !slices.Equal(del, []string{
		`      "name": "old",`, `      "type": "int",`, `      "default": 0`,
	}) || !slices.Equal(add, []string{
		`      "name": "note",`, `      "type": "string",`, `      "default": ""`,
	}) {
		t.Errorf("diff: removed %q, added %q", del, add)
	}
	if ctx := diffLines(body, "ctx"); !slices.Contains(ctx, `    {`) || slices.Contains(ctx, `      "name": "old",`) {
		t.Errorf("diff context %q", ctx)
	}
	if strings.Contains(body, "<script>alert") {
		t.Error("the diff page holds <script> unescaped")
	}
	if _, body := getURL(t, base+"/console/schemas/orders-value/diff?from=2&to=2"); !strings.Contains(body, `id="same"`) {
		t.Error("a diff of a version with itself does not say they are the same")
	}

	for path, code := range map[string]int{
		"/console/schemas/nope":                          http.StatusNotFound,
		"/console/schemas/orders-value?version=9":        http.StatusNotFound,
		"/console/schemas/orders-value?version=x":        http.StatusBadRequest,
		"/console/schemas/orders-value/diff?from=1&to=":  http.StatusBadRequest,
		"/console/schemas/orders-value/diff?from=1&to=7": http.StatusNotFound,
		"/console/schemas/events?version=1":              http.StatusNotFound, // soft-deleted
	} {
		if got, body := getURL(t, base+path); got != code {
			t.Errorf("GET %s: %d, want %d: %s", path, got, code, body)
		}
	}
}

// setLevel sets subject's compatibility level through the registry's
// REST API, as a client would.
func setLevel(t *testing.T, reg *schemareg.Registry, subject, level string) {
	t.Helper()
	srv := httptest.NewServer(schemareg.Handler(reg, func(*http.Request, schemareg.Op, string) error { return nil }))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/config/"+subject, strings.NewReader(`{"compatibility":"`+level+`"}`))
	req.Header.Set("Content-Type", schemareg.ContentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT /config/%s: %s", subject, resp.Status)
	}
}

// TestConsoleSchemasOff: without a registry the page says so; the
// subject pages answer 404.
func TestConsoleSchemasOff(t *testing.T) {
	base := schemaConsole(t, nil, allowAll)
	if code, body := getURL(t, base+"/console/schemas"); code != http.StatusOK || !strings.Contains(body, "The schema registry is off on this agent.") {
		t.Errorf("schemas page without a registry: %d: %s", code, body)
	}
	if code, body := getURL(t, base+"/console/schemas/x/diff?from=1&to=2"); code != http.StatusNotFound || !strings.Contains(body, "the schema registry is off") {
		t.Errorf("a diff without a registry: %d: %s", code, body)
	}
}

// TestConsoleSchemasAuthorized: a caller Authorize refuses sees no
// subject.
func TestConsoleSchemasAuthorized(t *testing.T) {
	reg := newRegistry(t)
	register(t, reg, "secret-subject", schemareg.RegisterRequest{Schema: orderV1})
	base := schemaConsole(t, reg, func(*http.Request) (int, error) { return http.StatusUnauthorized, errors.New("who are you") })
	for _, path := range []string{"/console/schemas", "/console/schemas/secret-subject", "/console/schemas/secret-subject/diff?from=1&to=1"} {
		code, body := getURL(t, base+path)
		if code != http.StatusUnauthorized || strings.Contains(body, "Order") {
			t.Errorf("GET %s refused: %d, and the body shows the schema: %v", path, code, strings.Contains(body, "Order"))
		}
	}
}
