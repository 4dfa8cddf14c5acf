package schemareg_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/schemareg"
	"github.com/strandkafka/strand/internal/schemareg/avroschema"
)

// call sends a request to srv and decodes the JSON answer into out (if
// not nil), returning the status.
func call(t *testing.T, srv *httptest.Server, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", schemareg.ContentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

type apiError struct {
	Code    int32  `json:"error_code"`
	Message string `json:"message"`
}

// TestAPI walks Confluent's REST API with Avro schemas: register,
// read back by version and id, look up, check compatibility, refuse an
// incompatible change with 409, configs, deletes, and an unauthorized
// caller refused with 403.
func TestAPI(t *testing.T) {
	db := metatest.New(nil)
	db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel6}}})
	reg := schemareg.New(db, avroschema.Format{})
	denied := errors.New("denied")
	srv := httptest.NewServer(schemareg.Handler(reg, func(r *http.Request, op schemareg.Op, subject string) error {
		if r.Header.Get("X-Test-Deny") != "" || subject == "secret" {
			return denied
		}
		return nil
	}))
	defer srv.Close()

	v1 := `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`
	v2 := `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"note","type":"string","default":""}]}`
	bad := `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"qty","type":"int"}]}`
	body := func(schema string) string {
		b, _ := json.Marshal(map[string]string{"schema": schema})
		return string(b)
	}

	var id struct{ ID int32 }
	if st := call(t, srv, "POST", "/subjects/orders-value/versions", body(v1), &id); st != 200 || id.ID != 1 {
		t.Fatalf("register v1: %d id %d", st, id.ID)
	}
	if st := call(t, srv, "POST", "/subjects/orders-value/versions", body(v2), &id); st != 200 || id.ID != 2 {
		t.Fatalf("register v2: %d id %d", st, id.ID)
	}
	var e apiError
	if st := call(t, srv, "POST", "/subjects/orders-value/versions", body(bad), &e); st != 409 || e.Code != 409 {
		t.Fatalf("incompatible: %d %+v", st, e)
	}
	var compat struct {
		IsCompatible bool     `json:"is_compatible"`
		Messages     []string `json:"messages"`
	}
	if st := call(t, srv, "POST", "/compatibility/subjects/orders-value/versions/latest?verbose=true", body(bad), &compat); st != 200 || compat.IsCompatible || len(compat.Messages) == 0 {
		t.Fatalf("compatibility of the bad one: %d %+v", st, compat)
	}
	var got schemareg.Registered
	if st := call(t, srv, "GET", "/subjects/orders-value/versions/latest", "", &got); st != 200 || got.Version != 2 || got.ID != 2 {
		t.Fatalf("latest: %d %+v", st, got)
	}
	var byID struct{ Schema string }
	if st := call(t, srv, "GET", "/schemas/ids/1", "", &byID); st != 200 || !strings.Contains(byID.Schema, `"Order"`) {
		t.Fatalf("by id: %d %+v", st, byID)
	}
	if st := call(t, srv, "GET", "/schemas/ids/42", "", &e); st != 404 || e.Code != 40403 {
		t.Fatalf("unknown id: %d %+v", st, e)
	}
	if st := call(t, srv, "POST", "/subjects/orders-value", body(v1), &got); st != 200 || got.Version != 1 || got.ID != 1 {
		t.Fatalf("lookup v1: %d %+v", st, got)
	}
	var versions []int32
	if st := call(t, srv, "GET", "/subjects/orders-value/versions", "", &versions); st != 200 || len(versions) != 2 {
		t.Fatalf("versions: %d %v", st, versions)
	}
	var cfg map[string]string
	if st := call(t, srv, "GET", "/config", "", &cfg); st != 200 || cfg["compatibilityLevel"] != "BACKWARD" {
		t.Fatalf("global config: %d %v", st, cfg)
	}
	if st := call(t, srv, "PUT", "/config/orders-value", `{"compatibility":"none"}`, &cfg); st != 200 || cfg["compatibility"] != "NONE" {
		t.Fatalf("set NONE: %d %v", st, cfg)
	}
	if st := call(t, srv, "POST", "/subjects/orders-value/versions", body(bad), &id); st != 200 || id.ID != 3 {
		t.Fatalf("at NONE: %d id %d", st, id.ID)
	}
	if st := call(t, srv, "PUT", "/config/orders-value", `{"compatibility":"SIDEWAYS"}`, &e); st != 422 || e.Code != meta.SchemaErrInvalidCompatibility {
		t.Fatalf("bad level: %d %+v", st, e)
	}
	var deleted int32
	if st := call(t, srv, "DELETE", "/subjects/orders-value/versions/3?permanent=true", "", &e); st != 404 || e.Code != meta.SchemaErrVersionNotSoftDeleted {
		t.Fatalf("permanent first: %d %+v", st, e)
	}
	if st := call(t, srv, "DELETE", "/subjects/orders-value/versions/3", "", &deleted); st != 200 || deleted != 3 {
		t.Fatalf("soft delete: %d %d", st, deleted)
	}
	var subjects []string
	if st := call(t, srv, "GET", "/subjects", "", &subjects); st != 200 || len(subjects) != 1 || subjects[0] != "orders-value" {
		t.Fatalf("subjects: %d %v", st, subjects)
	}
	if st := call(t, srv, "POST", "/subjects/orders-value/versions", `{"schema":"{not json"}`, &e); st != 422 || e.Code != meta.SchemaErrInvalidSchema {
		t.Fatalf("invalid schema: %d %+v", st, e)
	}
	if st := call(t, srv, "GET", "/subjects/secret/versions", "", &e); st != 403 || e.Code != 40301 {
		t.Fatalf("unauthorized: %d %+v", st, e)
	}
}

// lagging is an agent's copy one write behind the log: it shows
// behind's state until Sync catches it up with ahead, where the other
// agent registered.
type lagging struct {
	behind, ahead *metatest.DB
	synced        bool
}

func (l *lagging) View() *meta.View {
	if l.synced {
		return l.ahead.View()
	}
	return l.behind.View()
}

func (l *lagging) Propose(ctx context.Context, c meta.Command) (meta.Result, error) {
	return l.ahead.Propose(ctx, c)
}

func (l *lagging) Sync(context.Context) error { l.synced = true; return nil }

// TestAPIReadsAnotherAgentsWrite: a schema registered through one agent
// is found at once through another whose copy has not applied it yet
// (by id, by version and by lookup), because a miss catches the copy up
// with the log before answering 404.
func TestAPIReadsAnotherAgentsWrite(t *testing.T) {
	bootstrap := meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel6}}}
	allow := func(*http.Request, schemareg.Op, string) error { return nil }
	schema := `{"schema":"{\"type\":\"record\",\"name\":\"Order\",\"fields\":[{\"name\":\"id\",\"type\":\"long\"}]}"}`
	for _, path := range []string{"/schemas/ids/1", "/subjects/orders-value/versions/1", "/subjects/orders-value"} {
		t.Run(path, func(t *testing.T) {
			ahead, behind := metatest.New(nil), metatest.New(nil)
			ahead.MustPropose(t, bootstrap)
			behind.MustPropose(t, bootstrap)
			first := httptest.NewServer(schemareg.Handler(schemareg.New(ahead, avroschema.Format{}), allow))
			defer first.Close()
			l := &lagging{behind: behind, ahead: ahead}
			second := httptest.NewServer(schemareg.Handler(schemareg.New(l, avroschema.Format{}), allow))
			defer second.Close()

			var id struct{ ID int32 }
			if st := call(t, first, "POST", "/subjects/orders-value/versions", schema, &id); st != 200 || id.ID != 1 {
				t.Fatalf("register on the first agent: %d id %d", st, id.ID)
			}
			method, body := "GET", ""
			if path == "/subjects/orders-value" {
				method, body = "POST", schema
			}
			var got map[string]any
			if st := call(t, second, method, path, body, &got); st != 200 || !l.synced {
				t.Fatalf("%s %s on the lagging agent: %d %v (synced %v)", method, path, st, got, l.synced)
			}
		})
	}
}
