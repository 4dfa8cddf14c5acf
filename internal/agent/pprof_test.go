package agent_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/agent"
)

// fetchBody GETs base+path with header and returns the status and body.
func fetchBody(t *testing.T, base, path string, header map[string]string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, b
}

// gzipMagic starts a pprof profile (gzipped protobuf).
var gzipMagic = []byte{0x1f, 0x8b}

// TestPprofNeedsAdmin: with an admin token set, /debug/pprof/ refuses a
// caller without it (the profiles and /cmdline included) and serves a
// heap profile to one with it.
func TestPprofNeedsAdmin(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("pprof-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startWith(t, agent.Config{DataDir: t.TempDir(), AdminTokenFile: tokenFile}, nil)
	base := "http://" + a.HTTPAddr()
	good := map[string]string{"Authorization": "Bearer pprof-token"}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline", "/debug/pprof/symbol"} {
		for _, h := range []map[string]string{nil, {"Authorization": "Bearer wrong"}} {
			if code, body := fetchBody(t, base, path, h); code != http.StatusUnauthorized {
				t.Errorf("GET %s %v: %d, want 401; body %.80q", path, h, code, body)
			}
		}
	}
	code, body := fetchBody(t, base, "/debug/pprof/heap", good)
	if code != http.StatusOK || !bytes.HasPrefix(body, gzipMagic) {
		t.Errorf("GET /debug/pprof/heap with the token: %d, %d bytes starting %x; want 200 and a gzipped profile", code, len(body), body[:min(len(body), 4)])
	}
	code, body = fetchBody(t, base, "/debug/pprof/goroutine?debug=1", good)
	if code != http.StatusOK || !bytes.Contains(body, []byte("goroutine profile")) {
		t.Errorf("GET /debug/pprof/goroutine?debug=1 with the token: %d %.120q", code, body)
	}
}

// TestPprofOffLoopbackWithoutAuth: an agent with no token and no client
// certificates serves profiles on loopback only.
func TestPprofOffLoopbackWithoutAuth(t *testing.T) {
	loop := start(t, t.TempDir())
	if code, body := fetchBody(t, "http://"+loop.HTTPAddr(), "/debug/pprof/heap", nil); code != http.StatusOK || !bytes.HasPrefix(body, gzipMagic) {
		t.Errorf("loopback /debug/pprof/heap: %d, want 200 and a profile", code)
	}
	open := startWith(t, agent.Config{DataDir: t.TempDir(), HTTPListen: "0.0.0.0:0"}, nil)
	_, port, _ := net.SplitHostPort(open.HTTPAddr())
	if code, _ := fetchBody(t, "http://127.0.0.1:"+port, "/debug/pprof/heap", nil); code != http.StatusForbidden {
		t.Errorf("/debug/pprof/heap off loopback without auth: %d, want 403", code)
	}
}

// TestPprofCmdlineRedactsURLs: /debug/pprof/cmdline shows a URL's
// password as xxxxx, whether the URL is a --flag=value or an argument
// of its own, and leaves the other arguments as they are.
func TestPprofCmdlineRedactsURLs(t *testing.T) {
	const secret = "hunter2-secret"
	args := []string{"strand", "serve", "--log=postgres://u:" + secret + "@db:5432/x?log=l",
		"--objstore", "s3://bucket/p?endpoint=http://minio:9000&secret_key=" + secret, "--node-id=3"}
	got := agent.RedactArgs(args)
	if strings.Contains(strings.Join(got, " "), secret) {
		t.Errorf("the command line shows the secret: %q", got)
	}
	if got[0] != "strand" || got[1] != "serve" || got[3] != "--objstore" || got[5] != "--node-id=3" {
		t.Errorf("arguments without a URL changed: %q", got)
	}
	if !strings.HasPrefix(got[2], "--log=postgres://u:xxxxx@db:5432/") {
		t.Errorf("--log shown as %q, want the URL with its password redacted", got[2])
	}
}
