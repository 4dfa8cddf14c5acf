package main

import (
	"strconv"

	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestServeRefusesBadConfig checks that serve fails on a bad flag or
// environment variable before starting anything.
func TestServeRefusesBadConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{name: "flush bytes too small", args: []string{"--flush-bytes", "1"}, wantErr: "flush-bytes"},
		{name: "hedge percentile 1", args: []string{"--objstore-hedge-percentile", "1"}, wantErr: "objstore-hedge-percentile 1"},
		{name: "hedge ratio from env", env: map[string]string{"STRAND_OBJSTORE_HEDGE_MAX_RATIO": "2"}, wantErr: "objstore-hedge-max-ratio 2"},
		{name: "negative PUT budget from env", env: map[string]string{"STRAND_MAX_PUTS_PER_SEC": "-4"}, wantErr: "max-puts-per-sec -4"},
		{name: "bad kafka listen", args: []string{"--kafka-listen", "nonsense"}, wantErr: "kafka-listen"},
		{name: "bad log level", args: []string{"--log-level", "loud"}, wantErr: "log-level"},
		{name: "bad log format", args: []string{"--log-format", "xml"}, wantErr: `log-format "xml"`},
		{name: "bad log format from env", env: map[string]string{"STRAND_LOG_FORMAT": "logfmt"}, wantErr: `log-format "logfmt"`},
		{name: "session timeouts crossed", args: []string{"--group-min-session-timeout", "1m", "--group-max-session-timeout", "10s"}, wantErr: "group-min-session-timeout"},
		{name: "heartbeat not below session", args: []string{"--consumer-group-heartbeat-interval", "45s"}, wantErr: "consumer-group-heartbeat-interval"},
		{name: "transaction version", args: []string{"--transaction-version", "3"}, wantErr: "transaction-version"},
		{name: "bad env value", env: map[string]string{"STRAND_FLUSH_INTERVAL": "soon"}, wantErr: "STRAND_FLUSH_INTERVAL"},
		{name: "memory budget too small", args: []string{"--memory-budget", "100MiB"}, wantErr: "memory-budget 100MiB"},
		{name: "memory budget not a size", args: []string{"--memory-budget", "lots"}, wantErr: "memory-budget"},
		{name: "memory budget from env", env: map[string]string{"STRAND_MEMORY_BUDGET": "1MiB"}, wantErr: "memory-budget 1MiB"},
		{name: "memory budget from GOMEMLIMIT", env: map[string]string{"GOMEMLIMIT": "64MiB"}, wantErr: "memory-budget"},
		{name: "topic partition limit above 65536", args: []string{"--max-partitions-per-topic", "70000"}, wantErr: "max-partitions-per-topic"},
		{name: "cluster partition limit", args: []string{"--max-partitions", "-1"}, wantErr: "max-partitions -1"},
		{name: "fetch rate not a size", args: []string{"--max-fetch-bytes-per-sec", "fast"}, wantErr: "max-fetch-bytes-per-sec"},
		{name: "read-ahead not a size", args: []string{"--fetch-read-ahead-bytes", "far"}, wantErr: "fetch-read-ahead-bytes"},
		{name: "no parallel GETs", args: []string{"--fetch-max-parallel-gets", "0"}, wantErr: "fetch-max-parallel-gets 0: must be between 1"},
		{name: "no connections", args: []string{"--max-connections", "0"}, wantErr: "max-connections 0: must be at least 1"},
		{name: "negative connections per IP", args: []string{"--max-connections-per-ip", "-1"}, wantErr: "max-connections-per-ip -1: must not be negative"},
		{name: "no connections per IP, no overrides", args: []string{"--max-connections-per-ip", "0"}, wantErr: "admits nobody without max-connections-per-ip-overrides"},
		{name: "host name override", args: []string{"--max-connections-per-ip-overrides", "kafka.example:5"}, wantErr: `max-connections-per-ip-overrides: "kafka.example:5"`},
		{name: "negative fetch session slots", args: []string{"--max-incremental-fetch-session-cache-slots", "-2"}, wantErr: "max-incremental-fetch-session-cache-slots -2"},
		{name: "connections per IP from env", env: map[string]string{"STRAND_MAX_CONNECTIONS_PER_IP": "-3"}, wantErr: "max-connections-per-ip -3"},
		{name: "no snapshot kept", args: []string{"--snapshot-keep", "0"}, wantErr: "snapshot-keep 0: must be at least 1"},
		{name: "snapshot keep from env", env: map[string]string{"STRAND_SNAPSHOT_KEEP": "-2"}, wantErr: "snapshot-keep -2"},
		{name: "message max bytes 0", args: []string{"--message-max-bytes", "0"}, wantErr: "message-max-bytes 0: must be positive"},
		{name: "retention 0 ms", args: []string{"--log-retention-ms", "0"}, wantErr: "log-retention-ms and log-retention-bytes"},
		{name: "retention below -1", args: []string{"--log-retention-bytes", "-5"}, wantErr: "log-retention-bytes -5"},
		{name: "retention check from env", env: map[string]string{"STRAND_LOG_RETENTION_CHECK_INTERVAL_MS": "0"}, wantErr: "log-retention-check-interval-ms 0"},
		{name: "env applied", env: map[string]string{"STRAND_DEFAULT_PARTITIONS": "-1"}, wantErr: "default-partitions -1"},
		{name: "listeners and kafka-listen", args: []string{"--listeners", "PLAINTEXT://127.0.0.1:0"}, wantErr: "listeners and kafka-listen"},
		{name: "listener without protocol", args: []string{"--kafka-listen", ""}, env: map[string]string{"STRAND_LISTENERS": "CLIENT://127.0.0.1:0"}, wantErr: "listener-security-protocol-map"},
		{name: "SSL listener without a certificate", args: []string{"--kafka-listen", "", "--listeners", "SSL://127.0.0.1:0"}, wantErr: "tls-cert-file"},
		{name: "unknown client auth", args: []string{"--tls-client-auth", "maybe"}, wantErr: "tls-client-auth"},
		{name: "negative gc grace", args: []string{"--gc-grace", "-1s"}, wantErr: "gc-grace -1s"},
		{name: "compaction target from env", env: map[string]string{"STRAND_COMPACTION_TARGET_BYTES": "100B"}, wantErr: "compaction-target-bytes 100"},
		{name: "compaction target above the budget's eighth", args: []string{"--compaction-enable", "--compaction-target-bytes", "128MiB"}, wantErr: "compaction-target-bytes 134217728"},
		{name: "gc grace below 1ms from env", env: map[string]string{"STRAND_GC_GRACE": "10us"}, wantErr: "gc-grace 10µs"},
		{name: "gc grace of 1ms", args: []string{"--gc-grace", "1ms"}, wantErr: "gc-grace 1ms: must be at least 3m0s"},
		{name: "gc grace below the upload budget", args: []string{"--gc-grace", "2m"}, wantErr: "gc-grace 2m0s: must be at least 3m0s"},
		{name: "group partition series bound not a number", env: map[string]string{"STRAND_METRICS_MAX_GROUP_PARTITIONS": "lots"}, wantErr: "STRAND_METRICS_MAX_GROUP_PARTITIONS"},
		{
			name:    "flag wins over env",
			args:    []string{"--default-partitions", "-2"},
			env:     map[string]string{"STRAND_DEFAULT_PARTITIONS": "-1"},
			wantErr: "default-partitions -2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			root := newRootCmd()
			// Kernel-chosen ports, so a case that wrongly starts serving
			// takes no fixed port; the case's own flags come last and win.
			base := []string{"--data-dir", t.TempDir(), "--kafka-listen", "127.0.0.1:0", "--http-listen", "", "--schema-registry-listen", "", "--connect-listen", ""}
			root.SetArgs(append(append([]string{"serve"}, base...), tt.args...))
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			// A serve that wrongly starts is stopped at once by the
			// canceled context and returns nil, failing the case.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := root.ExecuteContext(ctx)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("serve %v: error %v, want one mentioning %q", tt.args, err, tt.wantErr)
			}
			// config print checks as serve does, word for word.
			printOut, perr := configPrint(t, append(base, tt.args...)...)
			if perr == nil || perr.Error() != err.Error() {
				t.Fatalf("config print %v: error %v, want serve's %q\n%s", tt.args, perr, err, printOut)
			}
		})
	}
}

// TestServeStopsOnCancel runs serve in-process and cancels its context,
// which is what SIGINT or SIGTERM do in main: serve must return nil after
// a graceful stop.
func TestServeStopsOnCancel(t *testing.T) {
	root := newRootCmd()
	root.SetArgs([]string{"serve", "--data-dir", t.TempDir(), "--kafka-listen", "127.0.0.1:0", "--http-listen", "", "--schema-registry-listen", "", "--connect-listen", ""})
	logs := &notifyWriter{match: `msg="strand agent serving"`, matched: make(chan struct{})}
	root.SetErr(logs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	select {
	case <-logs.matched:
	case err := <-done:
		t.Fatalf("serve returned before serving: %v\n%s", err, logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("serve not serving after 30s\n%s", logs)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after cancel: %v\n%s", err, logs)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve still running 30s after cancel\n%s", logs)
	}
	if !strings.Contains(logs.String(), "strand agent stopped") {
		t.Errorf("no clean stop logged:\n%s", logs)
	}
}

// startServe runs strand with args until the test ends, and returns its
// log once a line contains match (the agent serving).
func startServe(t *testing.T, match string, args ...string) *notifyWriter {
	t.Helper()
	root := newRootCmd()
	root.SetArgs(args)
	logs := &notifyWriter{match: match, matched: make(chan struct{})}
	root.SetErr(logs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-logs.matched:
	case err := <-done:
		done <- err // for the cleanup's wait
		t.Fatalf("serve returned before serving: %v\n%s", err, logs)
	case <-time.After(60 * time.Second):
		t.Fatalf("serve not serving after 60s\n%s", logs)
	}
	return logs
}

// notifyWriter keeps what is written and closes matched once a write
// contains match.
type notifyWriter struct {
	match   string
	matched chan struct{}
	once    sync.Once
	mu      struct {
		sync.Mutex
		b   strings.Builder
		tee *notifyWriter
	}
}

// tee makes w also write to t from now on.
func (w *notifyWriter) tee(t *notifyWriter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.tee = t
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.b.Write(p)
	if w.mu.tee != nil {
		w.mu.tee.Write(p)
	}
	if strings.Contains(string(p), w.match) {
		w.once.Do(func() { close(w.matched) })
	}
	return len(p), nil
}

func (w *notifyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.b.String()
}

// TestServeConnectionsMaxIdle runs serve with --connections-max-idle and
// checks an idle Kafka connection is closed.
func TestServeConnectionsMaxIdle(t *testing.T) {
	logs := startServe(t, `msg="strand agent serving"`, "serve", "--data-dir", t.TempDir(), "--kafka-listen", "127.0.0.1:0", "--http-listen", "", "--schema-registry-listen", "", "--connect-listen", "",
		"--connections-max-idle", "200ms")
	m := regexp.MustCompile(`msg="strand agent serving" kafka=(\S+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no Kafka address logged:\n%s", logs)
	}
	c, err := net.DialTimeout("tcp", m[1], 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n > 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("read on an idle connection: %d bytes, %v; want EOF", n, err)
	}
}

// TestServeRemoteStoreDefaults checks what serve turns on by default
// for a local directory (neither compaction nor hedged uploads: both
// only add to its disk's work) and under a latency profile modelling S3
// (both), and that the flags win.
func TestServeRemoteStoreDefaults(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "compaction=false hedged_uploads=false"},
		{[]string{"--objstore-latency", "s3-express"}, "compaction=true hedged_uploads=true"},
		{[]string{"--compaction-enable"}, "compaction=true hedged_uploads=false"},
		{[]string{"--objstore-latency", "s3-express", "--compaction-enable=false", "--objstore-hedge-percentile", "0"}, "compaction=false hedged_uploads=false"},
	} {
		root := newRootCmd()
		root.SetArgs(append([]string{"serve", "--data-dir", t.TempDir(), "--kafka-listen", "127.0.0.1:0", "--http-listen", "", "--schema-registry-listen", "", "--connect-listen", ""}, tt.args...))
		logs := &notifyWriter{match: `msg="strand agent serving"`, matched: make(chan struct{})}
		root.SetErr(logs)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- root.ExecuteContext(ctx) }()
		select {
		case <-logs.matched:
		case err := <-done:
			t.Fatalf("%v: serve returned before serving: %v\n%s", tt.args, err, logs)
		case <-time.After(30 * time.Second):
			t.Fatalf("%v: serve not serving after 30s\n%s", tt.args, logs)
		}
		cancel()
		<-done
		if !strings.Contains(logs.String(), tt.want) {
			t.Errorf("%v: serving line without %q:\n%s", tt.args, tt.want, logs)
		}
	}
}

// TestServeConsoleFlag: serve has the console on by default, so the
// embedded default shows it, and --console=false turns it off.
func TestServeConsoleFlag(t *testing.T) {
	for _, tc := range []struct {
		flag string
		want int
	}{{"", http.StatusOK}, {"--console=false", http.StatusNotFound}} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		args := []string{"serve", "--data-dir", t.TempDir(), "--kafka-listen", "127.0.0.1:0", "--http-listen", addr, "--schema-registry-listen", "", "--connect-listen", ""}
		if tc.flag != "" {
			args = append(args, tc.flag)
		}
		startServe(t, `msg="strand agent serving"`, args...)
		c := http.Client{Timeout: 30 * time.Second}
		resp, err := c.Get("http://" + addr + "/console/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("serve %q: GET /console/ %d, want %d", tc.flag, resp.StatusCode, tc.want)
		}
	}
}

// TestNotFlag checks that an on-by-default switch reads as its flag
// says and sets its Config field, the off switch, to the negation.
func TestNotFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		off  bool
	}{{nil, false}, {[]string{"--x"}, false}, {[]string{"--x=true"}, false}, {[]string{"--x=false"}, true}} {
		var off bool
		f := pflag.NewFlagSet("t", pflag.ContinueOnError)
		f.Var(notFlag{&off}, "x", "")
		f.Lookup("x").NoOptDefVal = "true"
		if err := f.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if off != tc.off {
			t.Errorf("%v: off %v, want %v", tc.args, off, tc.off)
		}
		if got, want := f.Lookup("x").Value.String(), strconv.FormatBool(!tc.off); got != want {
			t.Errorf("%v: String %q, want %q", tc.args, got, want)
		}
	}
}
