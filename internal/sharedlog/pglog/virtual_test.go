package pglog_test

import (
	"errors"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/backendtest"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
)

// TestVirtualFileToPostgres is the first migration of issue 6: a log that
// starts in a local file moves to PostgreSQL while appends continue, and
// then to a second PostgreSQL segment, named by logurl.NextURL.
func TestVirtualFileToPostgres(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	fileURL := (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
	v, err := logurl.OpenVirtual(ctx, fileURL, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := newID(t)
	acked := backendtest.Migrate(t, ctx, v,
		func(sharedlog.Chain) (string, error) { return logURL(t, "log", name+"/seg-00000001"), nil },
		logurl.NextURL,
	)
	backendtest.WantSchemes(t, v.Chain(), "file", "postgres", "postgres")
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	// Another agent opening the log follows the chain onto PostgreSQL.
	w, err := logurl.OpenVirtual(ctx, fileURL, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	backendtest.WantDense(t, ctx, w, acked)
	pos, err := w.Append(ctx, []byte("after reopen"))
	if err != nil || pos != sharedlog.Pos(len(acked)) {
		t.Fatalf("Append after reopening = (%d, %v), want (%d, nil)", pos, err, len(acked))
	}
}

// TestVirtualOverPostgres: a VirtualLog whose chain and segments all live
// in PostgreSQL, shared by two agents, reconfigured and trimmed.
func TestVirtualOverPostgres(t *testing.T) {
	ctx := testCtx(t)
	u := logURL(t, "log", newID(t))
	v, err := logurl.OpenVirtual(ctx, u, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	acked := backendtest.Migrate(t, ctx, v, logurl.NextURL)
	other, err := logurl.OpenVirtual(ctx, u, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	backendtest.WantDense(t, ctx, other, acked)
	if err := other.PrefixTrim(ctx, 10); err != nil {
		t.Fatal(err)
	}
	// v learns of the trim from the first segment's loglet.
	if es, err := v.ReadNext(ctx, 9, 20); !errors.Is(err, sharedlog.ErrTrimmed) {
		t.Fatalf("ReadNext(9) after the other agent trimmed to 10 = (%d entries, %v), want ErrTrimmed", len(es), err)
	}
}
