package cli

import (
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/schemareg"
	"github.com/strandkafka/strand/internal/schemareg/avroschema"
	"github.com/strandkafka/strand/internal/schemareg/jsonschema"
	"github.com/strandkafka/strand/internal/schemareg/protoschema"
)

const (
	orderV1  = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`
	orderV2  = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"note","type":"string","default":""}]}`
	orderBad = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"qty","type":"int"}]}`
)

// newRegistry returns Strand's registry over an in-memory metadata copy
// and a server of its REST API, with wrap (if not nil) around the
// handler. The registry itself is the tests' independent view.
func newRegistry(t *testing.T, wrap func(http.Handler) http.Handler, tlsServer bool) (*schemareg.Registry, *httptest.Server) {
	t.Helper()
	for _, env := range []string{"registry-url", "registry-user", "registry-password", "registry-password-file", "registry-token", "registry-token-file", "tls-ca", "tls-cert", "tls-key"} {
		t.Setenv(envName(env), "")
		os.Unsetenv(envName(env))
	}
	db := metatest.New(nil)
	db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel6}}})
	reg := schemareg.New(db, avroschema.Format{}, protoschema.Format{}, jsonschema.Format{})
	var h http.Handler = schemareg.Handler(reg, func(*http.Request, schemareg.Op, string) error { return nil })
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused TLS handshakes are the tests'
	if tlsServer {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return reg, srv
}

// runRegistry runs `strand registry ARGS --registry-url URL`.
func runRegistry(t *testing.T, url string, args ...string) result {
	t.Helper()
	return runAdmin(t, "registry", append(args, "--registry-url", url)...)
}

func mustRunRegistry(t *testing.T, url string, args ...string) string {
	t.Helper()
	r := runRegistry(t, url, args...)
	if r.err != nil {
		t.Fatalf("strand registry %s: %v\n%s", strings.Join(args, " "), r.err, r.stdout)
	}
	return r.stdout
}

// schemaFile writes text into a file of the test's and returns its path.
func schemaFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// decodeAs decodes a command's json or yaml output.
func decodeAs[T any](t *testing.T, format, out string) T {
	t.Helper()
	var v T
	var err error
	if format == OutputYAML {
		err = yaml.Unmarshal([]byte(out), &v)
	} else {
		err = json.Unmarshal([]byte(out), &v)
	}
	if err != nil {
		t.Fatalf("decoding %s: %v\n%s", format, err, out)
	}
	return v
}

// wantRegistryError checks that err is the registry's refusal with code,
// and that its text shows the code and the message.
func wantRegistryError(t *testing.T, err error, code int, message string) {
	t.Helper()
	var re *RegistryError
	if !errors.Is(err, ErrRegistry) || !errors.As(err, &re) || re.Code != code {
		t.Fatalf("err = %v, want the registry's error %d", err, code)
	}
	if s := err.Error(); !strings.Contains(s, "error "+strconv.Itoa(code)) || !strings.Contains(s, message) {
		t.Errorf("error text %q lacks the code %d or %q", s, code, message)
	}
}

// TestRegistrySubjects walks a subject's life through the commands:
// register two versions, refuse an incompatible third with Confluent's
// 409, list, get by version in text, json and yaml, compat, then soft
// and permanent deletes; each effect checked in the registry itself.
func TestRegistrySubjects(t *testing.T) {
	reg, srv := newRegistry(t, nil, false)
	u := srv.URL
	v1, v2, bad := schemaFile(t, "v1.avsc", orderV1), schemaFile(t, "v2.avsc", orderV2), schemaFile(t, "bad.avsc", orderBad)

	if out := mustRunRegistry(t, u, "subject", "register", "orders-value", "--schema-file", v1); out != "registered orders-value version 1, id 1\n" {
		t.Errorf("register v1 printed %q", out)
	}
	got := decodeAs[RegistrySchema](t, OutputJSON, mustRunRegistry(t, u, "subject", "register", "orders-value", "--schema-file", v2, "--format", "json"))
	if got.Subject != "orders-value" || got.Version != 2 || got.ID != 2 || got.Type != "AVRO" {
		t.Errorf("register v2: %+v", got)
	}
	// The same schema again is the same version, not a new one.
	if out := mustRunRegistry(t, u, "subject", "register", "orders-value", "--schema-file", v2); out != "registered orders-value version 2, id 2\n" {
		t.Errorf("register v2 again printed %q", out)
	}
	r := runRegistry(t, u, "subject", "register", "orders-value", "--schema-file", bad)
	wantRegistryError(t, r.err, 409, "")
	if _, err := reg.Version("orders-value", 3, true); err == nil {
		t.Fatal("the refused schema was registered")
	}
	mustRunRegistry(t, u, "subject", "register", "payments-value", "--schema-file", v1)

	if out := mustRunRegistry(t, u, "subject", "list"); out != "SUBJECT\norders-value\npayments-value\n" {
		t.Errorf("subject list:\n%s", out)
	}
	if out := mustRunRegistry(t, u, "subject", "list", "--prefix", "pay"); out != "SUBJECT\npayments-value\n" {
		t.Errorf("subject list --prefix pay:\n%s", out)
	}

	out := mustRunRegistry(t, u, "subject", "get", "orders-value")
	for _, want := range [][]string{{"subject", "orders-value"}, {"version", "2"}, {"id", "2"}, {"type", "AVRO"}} {
		if row := findRow(rows(out), want[0]); !slices.Equal(row, want) {
			t.Errorf("get: row %v, want %v:\n%s", row, want, out)
		}
	}
	if !strings.Contains(out, "\n  \"name\": \"Order\",\n") {
		t.Errorf("get does not show the schema indented:\n%s", out)
	}
	stored, err := reg.Version("orders-value", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if out := mustRunRegistry(t, u, "subject", "get", "orders-value", "--version", "1", "--schema-only"); out != stored.Schema+"\n" {
		t.Errorf("get --schema-only = %q, want the stored %q", out, stored.Schema)
	}
	for _, format := range []string{OutputJSON, OutputYAML} {
		got := decodeAs[RegistrySchema](t, format, mustRunRegistry(t, u, "subject", "get", "orders-value", "--version", "1", "--format", format))
		if got.Subject != "orders-value" || got.Version != 1 || got.ID != 1 || got.Type != "AVRO" || got.Schema != stored.Schema {
			t.Errorf("get --format %s: %+v", format, got)
		}
	}

	// Compatibility: the bad schema is refused with the reason, and the
	// command fails; v2 passes against v1.
	r = runRegistry(t, u, "compat", "orders-value", "--schema-file", bad, "--verbose")
	msgs, err := reg.Compatible("orders-value", -1, schemareg.RegisterRequest{Schema: orderBad}, false)
	if err != nil || len(msgs) == 0 {
		t.Fatalf("the registry finds the bad schema compatible: %v %v", msgs, err)
	}
	if !errors.Is(r.err, ErrIncompatible) || !strings.HasPrefix(r.stdout, "incompatible:\n") || !strings.Contains(r.stdout, msgs[0]) {
		t.Errorf("compat of the bad schema: err %v, printed:\n%s\nwant the reason %q", r.err, r.stdout, msgs[0])
	}
	if out := mustRunRegistry(t, u, "compat", "orders-value", "--schema-file", v2, "--version", "1"); out != "compatible\n" {
		t.Errorf("compat v2 against v1 printed %q", out)
	}
	c := decodeAs[RegistryCompat](t, OutputJSON, runRegistry(t, u, "compat", "orders-value", "--schema-file", bad, "--format", "json").stdout)
	if c.Compatible || len(c.Messages) != 0 {
		t.Errorf("compat --format json without --verbose: %+v", c)
	}

	// Deletes: one version soft, then the subject soft, then permanent.
	if out := mustRunRegistry(t, u, "subject", "delete", "orders-value", "--version", "latest"); out != "soft-deleted orders-value versions 2\n" {
		t.Errorf("delete --version latest printed %q", out)
	}
	if latest, err := reg.Version("orders-value", -1, false); err != nil || latest.Version != 1 {
		t.Errorf("after deleting version 2 the latest is %+v, %v; want 1", latest, err)
	}
	r = runRegistry(t, u, "subject", "delete", "orders-value", "--permanent")
	wantRegistryError(t, r.err, 40405, "")
	del := decodeAs[RegistryDeleted](t, OutputJSON, mustRunRegistry(t, u, "subject", "delete", "orders-value", "--format", "json"))
	if del.Subject != "orders-value" || !slices.Equal(del.Versions, []int{1}) || del.Permanent {
		t.Errorf("delete subject: %+v", del)
	}
	if out := mustRunRegistry(t, u, "subject", "list"); out != "SUBJECT\npayments-value\n" {
		t.Errorf("list after the delete:\n%s", out)
	}
	if out := mustRunRegistry(t, u, "subject", "list", "--deleted"); out != "SUBJECT\norders-value\npayments-value\n" {
		t.Errorf("list --deleted:\n%s", out)
	}
	if out := mustRunRegistry(t, u, "subject", "get", "orders-value", "--version", "2", "--deleted", "--schema-only"); !strings.Contains(out, `"note"`) {
		t.Errorf("get --deleted of a soft-deleted version: %q", out)
	}
	if out := mustRunRegistry(t, u, "subject", "delete", "orders-value", "--permanent"); out != "permanently deleted orders-value versions 1, 2\n" {
		t.Errorf("permanent delete printed %q", out)
	}
	if _, err := reg.Version("orders-value", 1, true); err == nil {
		t.Error("a permanently deleted version is still there")
	}
	r = runRegistry(t, u, "subject", "get", "orders-value")
	wantRegistryError(t, r.err, 40401, "Subject 'orders-value' not found.")

	// One version, permanently: it must be soft-deleted first.
	wantRegistryError(t, runRegistry(t, u, "subject", "delete", "payments-value", "--version", "1", "--permanent").err, 40407, "")
	mustRunRegistry(t, u, "subject", "delete", "payments-value", "--version", "1")
	if out := mustRunRegistry(t, u, "subject", "delete", "payments-value", "--version", "1", "--permanent"); out != "permanently deleted payments-value versions 1\n" {
		t.Errorf("permanent delete of a version printed %q", out)
	}
	if _, err := reg.Version("payments-value", 1, true); err == nil {
		t.Error("a permanently deleted version is still there")
	}
}

// TestRegistrySchemaTypes registers Protobuf (the type from the file's
// extension) with a reference, and JSON Schema, and reads them by id.
func TestRegistrySchemaTypes(t *testing.T) {
	reg, srv := newRegistry(t, nil, false)
	u := srv.URL
	common := schemaFile(t, "common.proto", "syntax = \"proto3\";\npackage shop;\nmessage Money { int64 units = 1; }\n")
	order := schemaFile(t, "order.proto", "syntax = \"proto3\";\npackage shop;\nimport \"common.proto\";\nmessage Order { shop.Money total = 1; }\n")
	js := schemaFile(t, "order.json", `{"type":"object","properties":{"id":{"type":"integer"}}}`)

	mustRunRegistry(t, u, "subject", "register", "money", "--schema-file", common)
	out := mustRunRegistry(t, u, "subject", "register", "orders-proto", "--schema-file", order, "--reference", "common.proto=money:1")
	if out != "registered orders-proto version 1, id 2\n" {
		t.Errorf("register with a reference printed %q", out)
	}
	got, err := reg.Version("orders-proto", 1, false)
	if err != nil || got.SchemaType != schemareg.TypeProtobuf || !slices.Equal(got.References, []schemareg.Reference{{Name: "common.proto", Subject: "money", Version: 1}}) {
		t.Fatalf("stored: %+v, %v", got, err)
	}
	mustRunRegistry(t, u, "subject", "register", "orders-json", "--schema-file", js, "--type", "json")
	if got, err := reg.Version("orders-json", 1, false); err != nil || got.SchemaType != schemareg.TypeJSON {
		t.Fatalf("stored JSON Schema: %+v, %v", got, err)
	}

	s := decodeAs[RegistrySchema](t, OutputJSON, mustRunRegistry(t, u, "schema", "get", "2", "--format", "json"))
	if s.ID != 2 || s.Type != "PROTOBUF" || !slices.Equal(s.References, []RegistryReference{{"common.proto", "money", 1}}) ||
		len(s.UsedBy) != 1 || s.UsedBy[0].Subject != "orders-proto" || s.UsedBy[0].Version != 1 || !strings.Contains(s.Schema, "message Order") {
		t.Errorf("schema get 2: %+v", s)
	}
	text := mustRunRegistry(t, u, "schema", "get", "2")
	for _, want := range []string{"reference  common.proto=money:1", "used by    orders-proto version 1", "message Order"} {
		if !strings.Contains(text, want) {
			t.Errorf("schema get 2 lacks %q:\n%s", want, text)
		}
	}
	r := runRegistry(t, u, "schema", "get", "42")
	wantRegistryError(t, r.err, 40403, "Schema 42 not found")

	// A reference to a version that does not exist is the registry's
	// refusal, and nothing is registered.
	r = runRegistry(t, u, "subject", "register", "orders-proto2", "--schema-file", order, "--reference", "common.proto=money:7")
	if !errors.Is(r.err, ErrRegistry) {
		t.Errorf("a dangling reference: err %v, want the registry's refusal", r.err)
	}
	if _, err := reg.Version("orders-proto2", -1, true); err == nil {
		t.Error("a schema with a dangling reference was registered")
	}
}

// TestRegistryConfigAndMode sets levels and modes and checks them in the
// registry, and that READONLY refuses a registration.
func TestRegistryConfigAndMode(t *testing.T) {
	reg, srv := newRegistry(t, nil, false)
	u := srv.URL
	v1, bad := schemaFile(t, "v1.avsc", orderV1), schemaFile(t, "bad.avsc", orderBad)
	mustRunRegistry(t, u, "subject", "register", "orders-value", "--schema-file", v1)

	if out := mustRunRegistry(t, u, "config", "get"); !slices.Equal(rows(out)[1], []string{globalName, "BACKWARD", "global"}) {
		t.Errorf("config get:\n%s", out)
	}
	if out := mustRunRegistry(t, u, "config", "get", "orders-value"); !slices.Equal(rows(out)[1], []string{"orders-value", "BACKWARD", "global"}) {
		t.Errorf("config get of a subject without a level:\n%s", out)
	}
	mustRunRegistry(t, u, "config", "set", "orders-value", "--level", "none")
	if l, err := reg.ConfigOf("orders-value", false, false); err != nil || l != schemareg.None {
		t.Fatalf("the subject's level is %q, %v; want NONE", l, err)
	}
	for _, format := range []string{OutputJSON, OutputYAML} {
		c := decodeAs[RegistryConfig](t, format, mustRunRegistry(t, u, "config", "get", "orders-value", "--format", format))
		if c != (RegistryConfig{Subject: "orders-value", Level: "NONE", Source: "subject"}) {
			t.Errorf("config get --format %s: %+v", format, c)
		}
	}
	// At NONE the incompatible schema registers.
	mustRunRegistry(t, u, "subject", "register", "orders-value", "--schema-file", bad)
	mustRunRegistry(t, u, "config", "set", "--level", "FULL_TRANSITIVE")
	if l, err := reg.ConfigOf("", true, false); err != nil || l != schemareg.FullTransitive {
		t.Errorf("the global level is %q, %v; want FULL_TRANSITIVE", l, err)
	}
	if out := mustRunRegistry(t, u, "config", "delete", "orders-value"); out != "removed orders-value's level NONE; the global level applies\n" {
		t.Errorf("config delete printed %q", out)
	}
	if _, err := reg.ConfigOf("orders-value", false, false); err == nil {
		t.Error("the subject's level is still set")
	}

	// A schema the levels accept, so that only the mode refuses it.
	mustRunRegistry(t, u, "config", "set", "--level", "NONE")
	mustRunRegistry(t, u, "mode", "set", "orders-value", "--mode", "readonly")
	if m, err := reg.ModeOf("orders-value", false, false); err != nil || m != "READONLY" {
		t.Fatalf("mode %q, %v; want READONLY", m, err)
	}
	m := decodeAs[RegistryMode](t, OutputJSON, mustRunRegistry(t, u, "mode", "get", "orders-value", "--format", "json"))
	if m != (RegistryMode{Subject: "orders-value", Mode: "READONLY"}) {
		t.Errorf("mode get: %+v", m)
	}
	if out := mustRunRegistry(t, u, "mode", "get"); !slices.Equal(rows(out)[1], []string{globalName, "READWRITE"}) {
		t.Errorf("global mode get:\n%s", out)
	}
	r := runRegistry(t, u, "subject", "register", "orders-value", "--schema-file", schemaFile(t, "v3.avsc", orderV2))
	wantRegistryError(t, r.err, 42205, "")
	mustRunRegistry(t, u, "mode", "set", "orders-value", "--mode", "READONLY_OVERRIDE")
	if m, _ := reg.ModeOf("orders-value", false, false); m != "READONLY_OVERRIDE" {
		t.Errorf("mode %q, want READONLY_OVERRIDE", m)
	}
	// IMPORT over a subject with versions needs --force.
	wantRegistryError(t, runRegistry(t, u, "mode", "set", "orders-value", "--mode", "IMPORT").err, 42205, "")
	mustRunRegistry(t, u, "mode", "set", "orders-value", "--mode", "IMPORT", "--force")
	if m, _ := reg.ModeOf("orders-value", false, false); m != "IMPORT" {
		t.Errorf("mode %q after --force, want IMPORT", m)
	}
}

// TestRegistryUsage: bad flags are refused before anything is sent
// (nothing listens at the URL).
func TestRegistryUsage(t *testing.T) {
	newRegistry(t, nil, false) // clears the STRAND_REGISTRY_* variables
	const dead = "http://127.0.0.1:1"
	avsc := schemaFile(t, "v1.avsc", orderV1)
	big := schemaFile(t, "big.avsc", strings.Repeat(" ", meta.MaxSchemaBytes+1))
	empty := schemaFile(t, "empty.avsc", " \n")
	pass := schemaFile(t, "pass", "pw\n")
	t.Setenv(envName("registry-token"), "")
	for _, args := range [][]string{
		{"subject", "get", "s", "--version", "0"},
		{"subject", "get", "s", "--version", "newest"},
		{"subject", "get", "s", "--format", "xml"},
		{"subject", "delete", "s", "--version", "-3"},
		{"subject", "register", "s"},
		{"subject", "register", "s", "--schema-file", avsc, "--type", "xml"},
		{"subject", "register", "s", "--schema-file", avsc, "--reference", "noversion"},
		{"subject", "register", "s", "--schema-file", avsc, "--reference", "name=subject:latest"},
		{"subject", "register", "s", "--schema-file", avsc, "--reference", "=subject:1"},
		{"subject", "register", "s", "--schema-file", big},
		{"subject", "register", "s", "--schema-file", empty},
		{"subject", "register", "s", "--schema-file", filepath.Join(t.TempDir(), "missing")},
		{"schema", "get", "x"},
		{"schema", "get", "0"},
		{"compat", "s", "--schema-file", avsc, "--version", "x"},
		{"config", "set", "--level", "SIDEWAYS"},
		{"config", "set"},
		{"mode", "set", "--mode", "WRITEONLY"},
		{"subject", "list", "--registry-password-file", pass},
		{"subject", "list", "--registry-url", "ftp://host"},
	} {
		r := runAdmin(t, "registry", append([]string{"--registry-url", dead}, args...)...)
		if !errors.Is(r.err, ErrUsage) {
			t.Errorf("strand registry %s: err %v, want a usage error", strings.Join(args, " "), r.err)
		}
	}
	t.Setenv(envName("registry-token"), "tok")
	if r := runAdmin(t, "registry", "subject", "list", "--registry-url", dead, "--registry-user", "u"); !errors.Is(r.err, ErrUsage) {
		t.Errorf("basic auth and a token: err %v, want a usage error", r.err)
	}
}

// TestRegistryAuth sends basic auth (the password from a file, then from
// the environment) or a bearer token, and trusts an https registry's
// certificate through --tls-ca.
func TestRegistryAuth(t *testing.T) {
	var seen []string
	_, srv := newRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = append(seen, r.Header.Get("Authorization"))
			user, pass, ok := r.BasicAuth()
			if (ok && user == "alice" && pass == "s3cret") || r.Header.Get("Authorization") == "Bearer tok3n" {
				h.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", schemareg.ContentType)
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error_code":40101,"message":"Unauthorized"}`))
		})
	}, true)
	ca := schemaFile(t, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	u := srv.URL
	if !strings.HasPrefix(u, "https://") {
		t.Fatalf("server URL %s is not https", u)
	}

	// Without the CA the certificate is not trusted.
	if r := runRegistry(t, u, "subject", "list"); r.err == nil || errors.Is(r.err, ErrRegistry) {
		t.Errorf("https without --tls-ca: err %v, want a TLS failure", r.err)
	}
	wantRegistryError(t, runRegistry(t, u, "subject", "list", "--tls-ca", ca).err, 40101, "Unauthorized")

	passFile := schemaFile(t, "pass", "s3cret\n")
	if out := mustRunRegistry(t, u, "subject", "list", "--tls-ca", ca, "--registry-user", "alice", "--registry-password-file", passFile); out != "SUBJECT\n" {
		t.Errorf("list with basic auth: %q", out)
	}
	t.Setenv(envName("registry-password"), "s3cret")
	mustRunRegistry(t, u, "subject", "list", "--tls-ca", ca, "--registry-user", "alice")
	t.Setenv(envName("registry-password"), "wrong")
	wantRegistryError(t, runRegistry(t, u, "subject", "list", "--tls-ca", ca, "--registry-user", "alice").err, 40101, "")

	tokenFile := schemaFile(t, "token", "tok3n\n")
	mustRunRegistry(t, u, "subject", "list", "--tls-ca", ca, "--registry-token-file", tokenFile)
	t.Setenv(envName("registry-token"), "tok3n")
	mustRunRegistry(t, u, "subject", "list", "--tls-ca", ca)
	if want := "Bearer tok3n"; seen[len(seen)-1] != want {
		t.Errorf("last Authorization %q, want %q", seen[len(seen)-1], want)
	}
}

// TestRegistryNotConfluent: an answer that is not Confluent's JSON error
// shows the HTTP status and the body; one over the bound fails.
func TestRegistryNotConfluent(t *testing.T) {
	_, srv := newRegistry(t, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/subjects" {
				w.Write([]byte("[\"" + strings.Repeat("x", maxRegistryResponseBytes) + "\"]"))
				return
			}
			http.Error(w, "no registry here", http.StatusNotFound)
		})
	}, false)
	var re *RegistryError
	r := runRegistry(t, srv.URL, "config", "get")
	if !errors.As(r.err, &re) || re.Status != http.StatusNotFound || re.Code != 0 || !strings.Contains(r.err.Error(), "HTTP 404 Not Found: no registry here") {
		t.Errorf("a plain 404: %v", r.err)
	}
	if r := runRegistry(t, srv.URL, "subject", "list"); r.err == nil || !strings.Contains(r.err.Error(), "answer over") {
		t.Errorf("an answer over the bound: %v", r.err)
	}
}
