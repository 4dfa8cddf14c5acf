package pgwire_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/strandkafka/strand/internal/sql/engine"
	"github.com/strandkafka/strand/internal/sql/pgwire"
)

// countingListener counts the writes to every connection it accepted.
type countingListener struct {
	net.Listener
	writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, writes: &l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A query's answer goes out in one write, as PostgreSQL's does: the
// extended protocol's replies wait for Sync (or Flush), the simple
// protocol's for ReadyForQuery. Each write is a system call here and a
// wake-up of the client; on a busy agent each wake-up is a wait for a
// processor.
func TestOneWritePerQuery(t *testing.T) {
	s, err := pgwire.NewServer(pgwire.Config{Auth: newUsers(t, pgwire.AuthTrust, nil), Engine: engine.New(nil, "test")})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &countingListener{Listener: inner}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	conn := connect(t, server{addr: inner.Addr().String()}.url("u", "", "disable"))
	ctx := context.Background()

	for _, c := range []struct {
		name string
		mode pgx.QueryExecMode
	}{
		// Parse, Describe, Sync once, then Bind, Describe, Execute, Sync.
		{"prepared", pgx.QueryExecModeCacheStatement},
		// Parse, Bind, Describe, Execute, Sync each time.
		{"unprepared", pgx.QueryExecModeExec},
		{"simple", pgx.QueryExecModeSimpleProtocol},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := range 3 {
				before := ln.writes.Load()
				var got int64
				if err := conn.QueryRow(ctx, "SELECT $1::int8 + 1", c.mode, int64(i)).Scan(&got); err != nil {
					t.Fatal(err)
				}
				if got != int64(i)+1 {
					t.Fatalf("got %d, want %d", got, i+1)
				}
				if n := ln.writes.Load() - before; i > 0 && n != 1 {
					t.Fatalf("query %d: %d writes, want 1", i, n)
				}
			}
		})
	}
	// An error in the extended protocol goes out at Sync too, and the
	// connection is usable after it.
	before := ln.writes.Load()
	if _, err := conn.Exec(ctx, "SELECT 1/$1::int8", int64(0)); err == nil {
		t.Fatal("division by zero succeeded")
	}
	if n := ln.writes.Load() - before; n > 2 {
		t.Fatalf("a failing statement: %d writes", n)
	}
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("after an error: %d, %v", one, err)
	}
}
