package cli

import (
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/objstore/memobj"
)

// connectStore is a metatest.DB as a connect.Store (the API never
// waits on Changed).
type connectStore struct{ *metatest.DB }

func (connectStore) Changed() <-chan struct{} { return nil }

// TestConnectCommands: create -f, list, describe, pause, resume,
// restart and delete against the REST API of package connect with a
// fake class, and a refusal printed as Connect's message.
func TestConnectCommands(t *testing.T) {
	db := metatest.New(nil)
	db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel8}}})
	class := connect.Class{Name: "com.example.FakeConnector", Kind: connect.KindSink,
		Validate: func(map[string]string) error { return nil },
		Secret:   func(k string) bool { return k == "connection.password" },
		New:      func(map[string]string) (connect.Task, error) { return nil, errors.New("not run here") }}
	srv := httptest.NewServer(connect.NewAPI(connect.APIConfig{Store: connectStore{db}, Classes: connect.Classes(class),
		Secrets: connect.NewSecrets(memobj.New())}))
	t.Cleanup(srv.Close)
	do := func(args ...string) result {
		return runAdmin(t, "connect", append(args, "--connect-url", srv.URL)...)
	}
	file := filepath.Join(t.TempDir(), "sink.json")
	if err := os.WriteFile(file, []byte(`{"name":"sink","config":{"connector.class":"FakeConnector","connection.password":"hunter2","tasks.max":"1"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := do("create", "-f", file); r.err != nil || !strings.Contains(r.stdout, "created connector sink") {
		t.Fatalf("create: %v %s", r.err, r.stdout)
	}
	r := do("create", "-f", file)
	var ce *ConnectError
	if !errors.As(r.err, &ce) || ce.Status != 409 || ce.Message != "Connector sink already exists" || !errors.Is(r.err, ErrConnect) {
		t.Fatalf("create again: %v", r.err)
	}
	r = do("list")
	if rs := rows(r.stdout); r.err != nil || len(rs) != 2 || rs[1][0] != "sink" || rs[1][1] != "sink" || rs[1][2] != "RUNNING" || rs[1][3] != "UNASSIGNED" {
		t.Fatalf("list: %v %q", r.err, r.stdout)
	}
	r = do("describe", "sink")
	if r.err != nil || !strings.Contains(r.stdout, "[hidden]") || strings.Contains(r.stdout, "hunter2") {
		t.Fatalf("describe: %v %s", r.err, r.stdout)
	}
	if r := do("pause", "sink"); r.err != nil {
		t.Fatalf("pause: %v", r.err)
	}
	if r := do("list", "--format", "json"); r.err != nil || !strings.Contains(r.stdout, `"state": "PAUSED"`) && !strings.Contains(r.stdout, `"state":"PAUSED"`) {
		t.Fatalf("list after pause: %v %s", r.err, r.stdout)
	}
	for _, action := range []string{"resume", "restart", "delete"} {
		if r := do(action, "sink"); r.err != nil {
			t.Fatalf("%s: %v", action, r.err)
		}
	}
	if r := do("describe", "sink"); !errors.As(r.err, &ce) || ce.Status != 404 {
		t.Fatalf("describe after delete: %v", r.err)
	}
	v := db.View()
	defer v.Close()
	if cs, err := v.Connectors(); err != nil || len(cs) != 0 {
		t.Fatalf("connectors left: %v %v", cs, err)
	}
}
