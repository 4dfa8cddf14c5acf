package schemareg_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/schemareg"
	"github.com/strandkafka/strand/internal/schemareg/avroschema"
	"github.com/strandkafka/strand/internal/schemareg/jsonschema"
	"github.com/strandkafka/strand/internal/schemareg/protoschema"
)

// TestConformance is the registry's conformance suite: Confluent Schema
// Registry's REST API as its documentation and its server describe it,
// one file of requests and answers per area under testdata/conformance
// (regenerated with -rewrite). Each file runs against a fresh registry
// serving the three formats.
//
// A directive is a request: the method, then the path with its query
// ("GET /subjects?deleted=true"). Its input is the body: JSON as is,
// or, to keep schemas readable, lines "schemaType: X", "id: N",
// "version: N", "reference: name subject version" and "as: denied"
// (the caller Authorize refuses), then "schema:" and the schema's text
// on the lines below. The answer is the status and the body (JSON
// re-encoded compactly, keys sorted; other bodies as they are).
func TestConformance(t *testing.T) {
	datadriven.Walk(t, "testdata/conformance", func(t *testing.T, path string) {
		srv := newConformanceServer(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return conformanceRequest(t, srv, d)
		})
	})
}

// denyHeader marks a request that Authorize refuses.
const denyHeader = "X-Test-Deny"

func newConformanceServer(t *testing.T) *httptest.Server {
	t.Helper()
	db := metatest.New(nil)
	db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel6}}})
	reg := schemareg.New(db, avroschema.Format{}, protoschema.Format{}, jsonschema.Format{})
	srv := httptest.NewServer(schemareg.Handler(reg, func(r *http.Request, _ schemareg.Op, subject string) error {
		if r.Header.Get(denyHeader) != "" || subject == "secret" {
			return errors.New("User is denied operation on this server.")
		}
		return nil
	}))
	t.Cleanup(srv.Close)
	return srv
}

func conformanceRequest(t *testing.T, srv *httptest.Server, d *datadriven.TestData) string {
	t.Helper()
	switch d.Cmd {
	case "GET", "POST", "PUT", "DELETE":
	default:
		d.Fatalf(t, "unknown method %q", d.Cmd)
	}
	var path []string
	for _, a := range d.CmdArgs {
		path = append(path, a.String())
	}
	body, deny, err := conformanceBody(d.Input)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	req, err := http.NewRequestWithContext(context.Background(), d.Cmd, srv.URL+strings.Join(path, " "), strings.NewReader(body))
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	req.Header.Set("Content-Type", schemareg.ContentType)
	if deny {
		req.Header.Set(denyHeader, "1")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != schemareg.ContentType {
		return fmt.Sprintf("%d Content-Type %q: %s\n", resp.StatusCode, ct, b)
	}
	return fmt.Sprintf("%d %s\n", resp.StatusCode, compactJSON(b))
}

// compactJSON re-encodes a JSON body with sorted keys and no spaces;
// a body that is not JSON (a raw schema) comes back as it is.
func compactJSON(b []byte) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return strings.TrimRight(string(b), "\n")
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return string(b)
	}
	return strings.TrimRight(out.String(), "\n")
}

// conformanceBody builds a request body from a directive's input (see
// TestConformance).
func conformanceBody(input string) (body string, deny bool, err error) {
	if t := strings.TrimSpace(input); t == "" || t[0] == '{' || t[0] == '[' {
		return t, false, nil
	}
	req := map[string]any{}
	var refs []schemareg.Reference
	lines := strings.Split(input, "\n")
	for i, line := range lines {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			return "", false, fmt.Errorf("line %q: want key: value", line)
		}
		val = strings.TrimSpace(val)
		switch key {
		case "schema":
			req["schema"] = strings.Join(lines[i+1:], "\n")
			if len(refs) > 0 {
				req["references"] = refs
			}
			b, err := json.Marshal(req)
			return string(b), deny, err
		case "schemaType":
			req["schemaType"] = val
		case "id", "version":
			n, err := strconv.Atoi(val)
			if err != nil {
				return "", false, fmt.Errorf("%s: %v", key, err)
			}
			req[key] = n
		case "reference":
			f := strings.Fields(val)
			if len(f) != 3 {
				return "", false, fmt.Errorf("reference %q: want name subject version", val)
			}
			v, err := strconv.Atoi(f[2])
			if err != nil {
				return "", false, fmt.Errorf("reference %q: %v", val, err)
			}
			refs = append(refs, schemareg.Reference{Name: f[0], Subject: f[1], Version: v})
		case "as":
			deny = val == "denied"
		default:
			return "", false, fmt.Errorf("unknown key %q", key)
		}
	}
	b, err := json.Marshal(req)
	return string(b), deny, err
}
