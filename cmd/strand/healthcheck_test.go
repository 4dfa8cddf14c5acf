package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	for _, tt := range []struct {
		name    string
		status  int
		body    string
		wantErr string // "" for exit 0
	}{
		{name: "ready", status: http.StatusOK, body: "ready\n"},
		{name: "replaying", status: http.StatusServiceUnavailable, body: "not ready: replaying the log\n", wantErr: "503 Service Unavailable: not ready: replaying the log"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var paths []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				paths = append(paths, r.URL.Path)
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			root := newRootCmd()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetArgs([]string{"healthcheck", "--http", strings.TrimPrefix(srv.URL, "http://")})
			err := root.Execute()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("healthcheck: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("healthcheck: error %v, want one with %q", err, tt.wantErr)
			}
			if len(paths) != 1 || paths[0] != "/readyz" {
				t.Errorf("requests to %v, want one to /readyz", paths)
			}
		})
	}
	t.Run("nothing listening", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		addr := strings.TrimPrefix(srv.URL, "http://")
		srv.Close()
		root := newRootCmd()
		root.SetArgs([]string{"healthcheck", "--http", addr})
		if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "not ready") {
			t.Fatalf("healthcheck of a closed port: %v, want a not ready error", err)
		}
	})
}

func TestReadyzURL(t *testing.T) {
	for _, tt := range []struct {
		flag, env, want string
	}{
		{want: "http://127.0.0.1:9644/readyz"},
		{env: ":9644", want: "http://127.0.0.1:9644/readyz"},
		{env: "0.0.0.0:7000", want: "http://127.0.0.1:7000/readyz"},
		{env: "[::]:7000", want: "http://[::1]:7000/readyz"},
		{env: "10.1.2.3:9644", want: "http://10.1.2.3:9644/readyz"},
		{flag: "127.0.0.1:1234", env: ":9644", want: "http://127.0.0.1:1234/readyz"},
		{flag: "https://strand-0.strand:9644/", want: "https://strand-0.strand:9644/readyz"},
	} {
		t.Setenv("STRAND_HTTP_LISTEN", tt.env)
		got, err := readyzURL(tt.flag)
		if err != nil || got != tt.want {
			t.Errorf("readyzURL(%q) with STRAND_HTTP_LISTEN=%q = %q, %v; want %q", tt.flag, tt.env, got, err, tt.want)
		}
	}
	if _, err := readyzURL("no-port"); err == nil {
		t.Error("readyzURL(no-port): no error")
	}
}
