package main

import (
	"context"
	"strings"
	"testing"
)

func TestNodeIDFromHostname(t *testing.T) {
	for _, tt := range []struct {
		host    string
		want    int32
		wantErr bool
	}{
		{host: "strand-0", want: 0},
		{host: "strand-12", want: 12},
		{host: "my-release-strand-3", want: 3},
		{host: "strand-4.strand-headless.kafka.svc.cluster.local", want: 4},
		{host: "strand-2147483647", want: 2147483647},
		{host: "strand-2147483648", wantErr: true},
		{host: "strand", wantErr: true},
		{host: "strand-", wantErr: true},
		{host: "strand-7f9c6d5b8-x2kqz", wantErr: true}, // a Deployment's pod
		{host: "strand-+1", wantErr: true},
		{host: "", wantErr: true},
	} {
		got, err := nodeIDFromHostname(tt.host)
		if (err != nil) != tt.wantErr || (err == nil && got != tt.want) {
			t.Errorf("nodeIDFromHostname(%q) = %d, %v; want %d (error %v)", tt.host, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestServeNodeIDFromHostname runs serve with --node-id-from-hostname
// (and its environment variable) on a faked host name: the agent serves
// as the ordinal's node, and a name without one or a --node-id beside
// it is refused.
func TestServeNodeIDFromHostname(t *testing.T) {
	defer func(h func() (string, error)) { hostname = h }(hostname)
	base := []string{"serve", "--data-dir", t.TempDir(), "--kafka-listen", "127.0.0.1:0", "--http-listen", "", "--schema-registry-listen", "", "--connect-listen", ""}

	hostname = func() (string, error) { return "strand-7", nil }
	t.Setenv("STRAND_NODE_ID_FROM_HOSTNAME", "true")
	logs := startServe(t, `msg="strand agent serving"`, base...)
	if !strings.Contains(logs.String(), " node_id=7 ") {
		t.Errorf("serving line without node_id=7:\n%s", logs)
	}

	for _, tt := range []struct {
		host    string
		args    []string
		wantErr string
	}{
		{host: "strand-7f9c6d5b8-x2kqz", wantErr: `host name "strand-7f9c6d5b8-x2kqz" does not end in -N`},
		{host: "strand-1", args: []string{"--node-id", "1"}, wantErr: "node-id-from-hostname and node-id"},
	} {
		hostname = func() (string, error) { return tt.host, nil }
		root := newRootCmd()
		root.SetArgs(append(base, tt.args...))
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // a serve that wrongly starts stops at once and returns nil
		if err := root.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("serve on host %s %v: %v, want an error with %q", tt.host, tt.args, err, tt.wantErr)
		}
	}
}
