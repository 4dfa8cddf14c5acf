package pglog

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strandkafka/strand/internal/retry"
	"github.com/strandkafka/strand/internal/sharedlog"
)

// WaitTail returns once the tail is past after or the loglet is sealed
// (then with the final tail and no error), or when ctx ends. It reads
// the tail with CheckTail at first and again whenever something may have
// moved it: a notification, the listener starting to listen (after a
// reconnect, notifications may have been lost), this handle's own append
// or seal, and every Options.WaitRecheckInterval.
func (l *Loglet) WaitTail(ctx context.Context, after sharedlog.Pos) (sharedlog.Pos, error) {
	for {
		// The channel is taken before the tail is read, so a change
		// after the read wakes this caller.
		ch, err := l.changedCh(ctx)
		if err != nil {
			return 0, err
		}
		tail, sealed, err := l.CheckTail(ctx)
		if err != nil {
			return 0, err
		}
		if tail > after || sealed {
			return tail, nil
		}
		if l.waitBlocked != nil {
			l.waitBlocked()
		}
		recheck := time.NewTimer(l.opts.WaitRecheckInterval)
		select {
		case <-ch:
		case <-recheck.C:
		case <-ctx.Done():
			recheck.Stop()
			return tail, ctx.Err()
		}
		recheck.Stop()
	}
}

// changedCh returns a channel closed at the next wake-up, starting the
// listener on first use. It does not wait for the listener to listen:
// when it does, it wakes every waiter, which reads the tail again.
func (l *Loglet) changedCh(ctx context.Context) (<-chan struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return nil, sharedlog.ErrClosed
	}
	if !l.mu.listening && !l.mu.sealed {
		l.mu.listening = true
		var lctx context.Context
		lctx, l.mu.listenStop = context.WithCancel(l.life)
		l.mu.listenDone = make(chan struct{})
		go l.listen(lctx, l.mu.listenDone)
	}
	return l.mu.changed, nil
}

// listen holds the handle's LISTEN connection until ctx ends (Close, or
// the seal), waking waiters on every notification. It reconnects for as
// long as it runs: without it, waiters learn of appends only every
// WaitRecheckInterval.
func (l *Loglet) listen(ctx context.Context, done chan struct{}) {
	defer close(done)
	loop := retry.Policy{Attempts: retry.Forever, Min: minBackoff, Max: maxBackoff}.Start(ctx, nil)
	for loop.Next() {
		conn, err := l.listenConn(ctx)
		if err != nil {
			continue
		}
		up := time.Now()
		l.mu.Lock()
		l.mu.listenPID = conn.PgConn().PID()
		// Listening from now on: what was sent before is unknown.
		l.wakeLocked()
		l.mu.Unlock()
		for {
			// pgx keeps notifications that arrive during a query in a
			// queue; this connection runs none after LISTEN, so each
			// call takes one from the socket.
			if _, err := conn.WaitForNotification(ctx); err != nil {
				break
			}
			l.mu.Lock()
			l.wakeLocked()
			l.mu.Unlock()
		}
		l.mu.Lock()
		l.mu.listenPID = 0
		l.mu.Unlock()
		l.closeConn(conn)
		if time.Since(up) > maxBackoff {
			// A connection that lasted is no failure to back off from;
			// one dropped at once (a server that keeps refusing) is.
			loop.Reset()
		}
	}
}

// listenConn opens a connection as the pool would, with its config and
// hooks (password, TLS, server settings), and LISTENs on the channel.
func (l *Loglet) listenConn(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opts.AttemptTimeout)
	defer cancel()
	pc := l.pool.Config()
	cc := pc.ConnConfig
	if pc.BeforeConnect != nil {
		if err := pc.BeforeConnect(ctx, cc); err != nil {
			return nil, err
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, err
	}
	if pc.AfterConnect != nil {
		err = pc.AfterConnect(ctx, conn)
	}
	if err == nil {
		_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize())
	}
	if err != nil {
		l.closeConn(conn)
		return nil, err
	}
	return conn, nil
}

// closeConn closes a listener connection, bounded even after Close.
func (l *Loglet) closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.AttemptTimeout)
	defer cancel()
	conn.Close(ctx)
}
