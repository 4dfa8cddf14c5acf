package pglog_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

// startingUp serves connections as a PostgreSQL server that is still
// recovering after a crash does: the startup message is answered with
// FATAL 57P03 (cannot_connect_now) and the connection closed.
func startingUp(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				be := pgproto3.NewBackend(c, c)
				if _, err := be.ReceiveStartupMessage(); err != nil {
					return
				}
				be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P03",
					Message: "the database system is starting up"})
				_ = be.Flush()
			}()
		}
	}()
	return ln.Addr().String()
}

// TestAppendWhileServerStartsUp: right after a restart PostgreSQL refuses
// connections with "the database system is starting up" until it has
// recovered. Nothing was sent, and the refusal passes within seconds, so
// an Append then must fail as one worth sending again, not as
// sharedlog.ErrRejected: the replica gives up on a rejected entry at
// once, and the history tests saw every transactional producer fail
// with UNKNOWN_SERVER_ERROR each time the server came back from a kill.
func TestAppendWhileServerStartsUp(t *testing.T) {
	fake := startingUp(t)
	var down atomic.Bool
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if down.Load() {
			addr = fake
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	l, pool := oneConnLoglet(t, cfg)

	down.Store(true)
	pool.Reset() // the server "restarted": every connection is new
	_, err = l.Append(testCtx(t), []byte("second"))
	if err == nil {
		t.Fatal("Append succeeded through a server that refuses every connection")
	}
	if errors.Is(err, sharedlog.ErrRejected) || errors.Is(err, sharedlog.ErrClosed) || errors.Is(err, sharedlog.ErrSealed) {
		t.Fatalf("Append while the server starts up: %v; want an error worth retrying", err)
	}

	down.Store(false)
	if pos, err := l.Append(testCtx(t), []byte("second")); err != nil || pos != 1 {
		t.Fatalf("Append once the server is up = (%d, %v), want position 1", pos, err)
	}
	wantLog(t, l, "first", "second")
}
