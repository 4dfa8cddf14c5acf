package pgsource

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// sessionParams fix how the server writes values as text, so that
// types.go reads one format whatever the server's defaults.
var sessionParams = map[string]string{
	"DateStyle":          "ISO, MDY",
	"TimeZone":           "UTC",
	"IntervalStyle":      "iso_8601",
	"extra_float_digits": "3",
	"bytea_output":       "hex",
}

// connString is the keyword/value connection string without the
// password (which goes into the parsed config, so it never appears in
// a string that could be logged).
func (c *Config) connString() string {
	q := func(v string) string {
		return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
	}
	return "host=" + q(c.Host) + " port=" + strconv.Itoa(c.Port) + " user=" + q(c.User) +
		" dbname=" + q(c.DBName) + " sslmode=" + q(c.SSLMode)
}

// connect opens a query connection.
func (c *Config) connect(ctx context.Context, app string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(c.connString())
	if err != nil {
		return nil, err
	}
	cfg.Password = c.Password
	for k, v := range sessionParams {
		cfg.RuntimeParams[k] = v
	}
	cfg.RuntimeParams["application_name"] = app
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s:%d: %w", c.Host, c.Port, err)
	}
	return conn, nil
}

// connectReplication opens a logical replication connection.
func (c *Config) connectReplication(ctx context.Context, app string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(c.connString())
	if err != nil {
		return nil, err
	}
	cfg.Password = c.Password
	for k, v := range sessionParams {
		cfg.RuntimeParams[k] = v
	}
	cfg.RuntimeParams["application_name"] = app
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("replication connection to %s:%d: %w", c.Host, c.Port, err)
	}
	return conn, nil
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// pgCode is err's SQLSTATE, "" if it has none.
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
