package logurl

import (
	"net/url"
	"strings"
)

// Passwords and the chain. A VirtualLog stores its segments' URLs in its
// chain, which anyone who can read the log's register (a file, a table
// row) reads, and which the admin API shows. So a postgres:// segment
// URL enters the chain without its password: the first segment's is
// derived from the --log URL with the password taken out, and a
// loglet is opened with Options.Password (or the --log URL's own)
// put back where its URL names a user but no password. Without either,
// pgx reads PGPASSWORD or a password file (PGPASSFILE, ~/.pgpass) as
// libpq does.

// passwordParam is the connection parameter pgx reads a password from.
const passwordParam = "password"

// isPostgres reports whether raw is a postgres:// URL.
func isPostgres(raw string) bool {
	scheme, _, ok := strings.Cut(raw, "://")
	return ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql"))
}

// HasPassword reports whether a postgres:// URL carries a password, in
// its user info or its password parameter.
func HasPassword(raw string) bool { return urlPassword(raw) != "" }

// urlPassword is the password a postgres:// URL carries, or "".
func urlPassword(raw string) string {
	if !isPostgres(raw) {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			return pw
		}
	}
	return u.Query().Get(passwordParam)
}

// StripPassword returns a postgres:// URL without its password; other
// URLs, and ones that do not parse, as they are.
func StripPassword(raw string) string {
	if !isPostgres(raw) {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	if q := u.Query(); q.Has(passwordParam) {
		q.Del(passwordParam)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// withPassword returns a postgres:// URL that carries no password with
// pw put in its user info; others as they are.
func withPassword(raw, pw string) string {
	if pw == "" || !isPostgres(raw) || HasPassword(raw) {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.User == nil || u.User.Username() == "" {
		return raw
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	return u.String()
}
