package pglog

import (
	"context"
	"fmt"
	"net/url"
	"regexp"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// URL parameters pglog takes for itself; all others go to pgx (sslmode,
// pool_max_conns, connect_timeout, any server setting, ...).
const (
	paramLog    = "log"
	paramPrefix = "table_prefix"
	paramSchema = "schema"
)

const (
	// defaultPoolConns is the pool size of a Loglet opened by URL: one
	// connection for the writer and a few for readers.
	defaultPoolConns = 4
	// firstSegment names a VirtualLog's first segment, under the log.
	firstSegment = "seg-00000000"
)

// Target is what a postgres:// URL names: a connection string for pgx,
// the log id, and the table options.
type Target struct {
	ConnString string
	LogID      string
	Options    Options
}

// ParseURL splits a URL of the form
//
//	postgres://user:password@host:port/database?log=ID[&table_prefix=P][&schema=S][&pgx options]
//
// (scheme postgres or postgresql). The password is better left to
// PGPASSWORD or a .pgpass file: a VirtualLog stores its segments' URLs in
// its chain.
func ParseURL(rawURL string) (Target, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Target{}, fmt.Errorf("%w: %v", ErrBadOptions, err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return Target{}, fmt.Errorf("%w: %q is not a postgres:// URL", ErrBadOptions, rawURL)
	}
	q := u.Query()
	tg := Target{LogID: q.Get(paramLog)}
	tg.Options.TablePrefix = q.Get(paramPrefix)
	tg.Options.Schema = q.Get(paramSchema)
	if tg.LogID == "" {
		return Target{}, fmt.Errorf("%w: %q names no log (add ?%s=ID)", ErrBadOptions, redact(u), paramLog)
	}
	q.Del(paramLog)
	q.Del(paramPrefix)
	q.Del(paramSchema)
	if !q.Has("synchronous_commit") {
		// Acknowledged must mean durable, whatever the server's default.
		q.Set("synchronous_commit", "on")
	}
	u.RawQuery = q.Encode()
	tg.ConnString = u.String()
	return tg, nil
}

// redact hides a URL's password for error messages.
func redact(u *url.URL) string { return u.Redacted() }

// OpenURL opens the loglet a postgres:// URL names (see ParseURL) with a
// pool of its own, which Close closes. opts fills in what the URL leaves
// unset.
func OpenURL(ctx context.Context, rawURL string, opts Options) (*Loglet, error) {
	tg, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if tg.Options.TablePrefix != "" {
		opts.TablePrefix = tg.Options.TablePrefix
	}
	if tg.Options.Schema != "" {
		opts.Schema = tg.Options.Schema
	}
	pool, err := newPool(ctx, tg.ConnString)
	if err != nil {
		return nil, err
	}
	l, err := open(ctx, pool, true, tg.LogID, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return l, nil
}

func newPool(ctx context.Context, connString string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadOptions, err)
	}
	if u, err := url.Parse(connString); err == nil && !u.Query().Has("pool_max_conns") {
		cfg.MaxConns = defaultPoolConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pglog: connect: %w", err)
	}
	return pool, nil
}

// withLog returns rawURL with its log parameter set to id.
func withLog(rawURL, id string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadOptions, err)
	}
	q := u.Query()
	q.Set(paramLog, id)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// FirstSegmentURL returns the URL of the first segment of the VirtualLog
// rawURL names: the same database and tables, log id <log>/seg-00000000.
func FirstSegmentURL(rawURL string) (string, error) {
	tg, err := ParseURL(rawURL)
	if err != nil {
		return "", err
	}
	return withLog(rawURL, tg.LogID+"/"+firstSegment)
}

var trailingNumber = regexp.MustCompile(`^(.*?)([0-9]+)$`)

// NextURL names the segment that follows chain c's active postgres
// segment, as sharedlog.DefaultNextURL does for paths: the number ending
// the active segment's log id is replaced by c.Version+1, zero-padded to
// 8 digits (or "-" and that number is appended when it ends in none).
func NextURL(c sharedlog.Chain) (string, error) {
	if c.Empty() {
		return "", fmt.Errorf("%w: no segment to follow", sharedlog.ErrInvalidChain)
	}
	active := c.Active().URL
	tg, err := ParseURL(active)
	if err != nil {
		return "", err
	}
	n := fmt.Sprintf("%08d", c.Version+1)
	id := tg.LogID + "-" + n
	if m := trailingNumber.FindStringSubmatch(tg.LogID); m != nil {
		id = m[1] + n
	}
	next, err := withLog(active, id)
	if err != nil {
		return "", err
	}
	if c.Contains(next) {
		return "", fmt.Errorf("%w: next segment name %q is taken", sharedlog.ErrInvalidChain, next)
	}
	return next, nil
}
