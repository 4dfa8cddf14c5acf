package logurl_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
)

// closedPort returns a loopback port that nothing listens on: it was
// the kernel's pick a moment ago and is closed again.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// unreachablePostgres returns a loglet URL on a PostgreSQL that is not
// there: connecting is refused at once.
func unreachablePostgres(t *testing.T) string {
	return fmt.Sprintf("postgres://strand@127.0.0.1:%d/strand?log=unreachable/seg-1&connect_timeout=5", closedPort(t))
}

// TestOpenErrorHasNoHandle: a failed Open returns a nil Loglet, whatever
// the backend, so a caller that closes what it got on cleanup has
// nothing to close. (A backend's nil *Loglet in the interface is not a
// nil Loglet, and its Close panics.)
func TestOpenErrorHasNoHandle(t *testing.T) {
	ctx := testCtx(t)
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{
		"postgres unreachable": unreachablePostgres(t),
		"postgres no log":      "postgres://127.0.0.1:1/db",
		"etcd bad option":      "etcd://127.0.0.1:1/x?bad=1",
		"dynamodb no table":    "dynamodb:///x",
		"s3 no bucket":         "s3:///x",
		"file under a file":    fileURL(filepath.Join(notDir, "dir")),
	}
	for name, u := range tests {
		t.Run(name, func(t *testing.T) {
			l, err := logurl.Open(ctx, u)
			if err == nil {
				l.Close()
				t.Fatalf("Open(%s) succeeded", u)
			}
			if l != nil {
				t.Fatalf("Open(%s) = (%T, %v), want a nil Loglet with the error", u, l, err)
			}
		})
	}
}

// TestMigrateToUnreachablePostgres is issue 19's defect 6 through the
// VirtualLog: moving a file log onto a PostgreSQL that refuses
// connections fails with the connection error, without a panic, before
// the seal. The stored chain is unchanged and appends continue on the
// file segment.
func TestMigrateToUnreachablePostgres(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	ms, err := sharedlog.OpenFileMetaStore(filepath.Join(dir, "chain.json"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := sharedlog.OpenVirtual(ctx, ms, logurl.Opener(dir), sharedlog.VirtualOptions{InitialURL: "file:seg-00000000"})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	appendAll(t, ctx, v, "a", "b")
	before, err := ms.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}

	err = v.Reconfigure(ctx, unreachablePostgres(t))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Reconfigure to an unreachable PostgreSQL = %v, want connection refused", err)
	}
	if !strings.Contains(err.Error(), "new segment") {
		t.Errorf("error %q does not say it was the new segment that failed", err)
	}
	after, err := ms.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("stored chain %+v after the refused migration, was %+v", after, before)
	}
	if _, sealed, err := v.CheckTail(ctx); sealed || err != nil {
		t.Fatalf("CheckTail after the refused migration: sealed %v, %v", sealed, err)
	}
	appendAll(t, ctx, v, "c")
	if got := readAll(t, ctx, v, 0); fmt.Sprint(got) != "[a b c]" {
		t.Fatalf("log holds %q, want [a b c]", got)
	}
}
