package jdbcsink

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// family is a target column's type, coarsely, to judge whether a kind
// may be written into it.
type family uint8

const (
	fOther family = iota // enums, domains, arrays...: text only
	fBool
	fInt
	fFloat
	fDecimal
	fText
	fBytes
	fDate
	fTimestamp
	fTime
	fJSON
	fUUID
)

// compatible says which column families take a kind's values: what
// the database converts without loss of meaning. A mismatch outside
// it is refused before writing, naming table and column.
var compatible = map[kind][]family{
	kNull:        nil, // anything
	kBool:        {fBool, fInt},
	kInt16:       {fInt, fDecimal, fFloat, fText},
	kInt32:       {fInt, fDecimal, fFloat, fText},
	kInt64:       {fInt, fDecimal, fFloat, fText},
	kFloat32:     {fFloat, fDecimal, fText},
	kFloat64:     {fFloat, fDecimal, fText},
	kDecimal:     {fDecimal, fFloat, fText},
	kString:      {fText, fJSON, fUUID, fDecimal, fDate, fTimestamp, fTime, fOther},
	kBytes:       {fBytes},
	kDate:        {fDate, fTimestamp, fText},
	kTimestamp:   {fTimestamp, fText},
	kTimestampTZ: {fTimestamp, fText},
	kTime:        {fTime, fText},
	kJSON:        {fJSON, fText},
	kUUID:        {fUUID, fText},
}

func fits(k kind, f family) bool {
	fs := compatible[k]
	if fs == nil {
		return true
	}
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

// idleTxTimeout is how long the database keeps a sink's transaction (or,
// for MariaDB, connection) that nobody uses, before ending it and
// releasing its locks.
const idleTxTimeout = 2 * time.Minute

// connMaxIdle is how long the sink keeps an unused connection: below
// idleTxTimeout, so it never uses one the server has closed.
const connMaxIdle = time.Minute

// dialect is what differs between the target databases: the driver
// and its DSN, quoting, placeholders, column types, upsert syntax.
type dialect interface {
	driver() string
	dsn(c *Config) string
	quote(id string) string
	// placeholder is the i-th (from 1) parameter of a statement.
	placeholder(i int) string
	// columnType is the type auto-create and schema evolution give a
	// column of a kind (key: part of the primary key).
	columnType(c column, key bool) string
	// family reads information_schema.columns.data_type.
	family(dataType string) family
	// upsert is what follows INSERT ... VALUES ... to update a row
	// whose key is taken.
	upsert(table string, key, cols []string) string
	// columnsQuery lists a table's columns (name, data_type); its one
	// parameter is the table's name.
	columnsQuery() string
	addColumn() string // "ADD COLUMN IF NOT EXISTS"
	// maxParams bounds a statement's parameters.
	maxParams() int
}

func dialectOf(name string) dialect {
	if name == "postgresql" {
		return postgres{}
	}
	return mariadb{}
}

type postgres struct{}

func (postgres) driver() string { return "pgx" }

func (postgres) dsn(c *Config) string {
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(c.Host, strconv.Itoa(c.Port)), Path: "/" + c.Database}
	if c.User != "" {
		u.User = url.UserPassword(c.User, c.Password)
	}
	q := url.Values{}
	if v := c.Params.Get("sslmode"); v != "" {
		q.Set("sslmode", v)
	}
	if v := c.Params.Get("currentSchema"); v != "" {
		// The JDBC driver's name for the schema to create and find
		// tables in.
		q.Set("search_path", v)
	}
	q.Set("application_name", "strand-jdbc-sink")
	// Values are written in UTC; a timestamptz read back shows it so.
	q.Set("timezone", "UTC")
	// A batch's transaction never waits on the sink between
	// statements; one left open is a task whose machine vanished (not
	// one killed: its sockets close with it), and its lock on the
	// offsets would stop the connector's next task until TCP noticed.
	q.Set("idle_in_transaction_session_timeout", strconv.Itoa(int(idleTxTimeout/time.Millisecond)))
	u.RawQuery = q.Encode()
	return u.String()
}

func (postgres) quote(id string) string { return `"` + strings.ReplaceAll(id, `"`, `""`) + `"` }

func (postgres) placeholder(i int) string { return "$" + strconv.Itoa(i) }

func (postgres) columnType(c column, key bool) string {
	switch c.kind {
	case kBool:
		return "boolean"
	case kInt16:
		return "smallint"
	case kInt32:
		return "integer"
	case kInt64:
		return "bigint"
	case kFloat32:
		return "real"
	case kFloat64:
		return "double precision"
	case kDecimal:
		if c.precision > 0 && c.scale >= 0 {
			return fmt.Sprintf("numeric(%d,%d)", c.precision, c.scale)
		}
		return "numeric"
	case kBytes:
		return "bytea"
	case kDate:
		return "date"
	case kTimestamp:
		return "timestamp(6)"
	case kTimestampTZ:
		return "timestamptz(6)"
	case kTime:
		return "time(6)"
	case kJSON:
		return "jsonb"
	case kUUID:
		return "uuid"
	}
	return "text"
}

func (postgres) family(t string) family {
	switch t {
	case "boolean":
		return fBool
	case "smallint", "integer", "bigint":
		return fInt
	case "real", "double precision":
		return fFloat
	case "numeric", "money":
		return fDecimal
	case "text", "character varying", "character", "name", "citext":
		return fText
	case "bytea":
		return fBytes
	case "date":
		return fDate
	case "timestamp without time zone", "timestamp with time zone":
		return fTimestamp
	case "time without time zone", "time with time zone":
		return fTime
	case "json", "jsonb":
		return fJSON
	case "uuid":
		return fUUID
	}
	return fOther
}

func (postgres) upsert(_ string, key, cols []string) string {
	p := postgres{}
	var b strings.Builder
	b.WriteString(" ON CONFLICT (")
	for i, k := range key {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.quote(k))
	}
	b.WriteString(")")
	var set []string
	for _, c := range cols {
		if !contains(key, c) {
			set = append(set, p.quote(c)+" = EXCLUDED."+p.quote(c))
		}
	}
	if len(set) == 0 {
		b.WriteString(" DO NOTHING")
		return b.String()
	}
	b.WriteString(" DO UPDATE SET " + strings.Join(set, ", "))
	return b.String()
}

func (postgres) columnsQuery() string {
	return "SELECT column_name, data_type FROM information_schema.columns " +
		"WHERE table_schema = current_schema() AND table_name = $1"
}

func (postgres) addColumn() string { return "ADD COLUMN IF NOT EXISTS" }

// maxParams: the protocol's Bind counts parameters in 16 bits.
func (postgres) maxParams() int { return 65535 }

type mariadb struct{}

func (mariadb) driver() string { return "mysql" }

func (mariadb) dsn(c *Config) string {
	m := mysql.NewConfig()
	m.User, m.Passwd = c.User, c.Password
	m.Net, m.Addr = "tcp", net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
	m.DBName = c.Database
	m.ParseTime = true
	m.Loc = time.UTC
	// One round trip per statement instead of prepare, execute, close:
	// safe with utf8mb4, the connection's character set.
	m.InterpolateParams = true
	// wait_timeout: as PostgreSQL's idle_in_transaction_session_timeout
	// above, though MariaDB's counts any idle connection (the pool
	// drops them sooner, connMaxIdle).
	m.Params = map[string]string{"time_zone": "'+00:00'", "sql_mode": "'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'",
		"wait_timeout": strconv.Itoa(int(idleTxTimeout / time.Second))}
	return m.FormatDSN()
}

func (mariadb) quote(id string) string { return "`" + strings.ReplaceAll(id, "`", "``") + "`" }

func (mariadb) placeholder(int) string { return "?" }

func (mariadb) columnType(c column, key bool) string {
	switch c.kind {
	case kBool:
		return "BOOLEAN"
	case kInt16:
		return "SMALLINT"
	case kInt32:
		return "INT"
	case kInt64:
		return "BIGINT"
	case kFloat32:
		return "FLOAT"
	case kFloat64:
		return "DOUBLE"
	case kDecimal:
		// MariaDB's DECIMAL needs a precision: at most 65 digits, 38
		// after the point.
		switch {
		case c.precision > 0 && c.precision <= 65 && c.scale >= 0 && c.scale <= 38:
			return fmt.Sprintf("DECIMAL(%d,%d)", c.precision, c.scale)
		case c.scale >= 0 && c.scale <= 38:
			return fmt.Sprintf("DECIMAL(65,%d)", c.scale)
		}
		return "DECIMAL(65,30)"
	case kBytes:
		if key {
			return "VARBINARY(255)"
		}
		return "LONGBLOB"
	case kDate:
		return "DATE"
	case kTimestamp, kTimestampTZ:
		// DATETIME rather than TIMESTAMP: TIMESTAMP ends in 2038 and
		// converts by the session's zone; values are UTC.
		return "DATETIME(6)"
	case kTime:
		return "TIME(6)"
	case kJSON:
		return "JSON"
	case kUUID:
		return "CHAR(36)"
	}
	// A key column must have a bounded length to be indexed.
	if key {
		return "VARCHAR(255)"
	}
	return "LONGTEXT"
}

func (mariadb) family(t string) family {
	switch t {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "bit", "year":
		return fInt
	case "float", "double", "real":
		return fFloat
	case "decimal", "numeric":
		return fDecimal
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext":
		return fText
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return fBytes
	case "date":
		return fDate
	case "datetime", "timestamp":
		return fTimestamp
	case "time":
		return fTime
	case "json":
		return fJSON
	case "uuid":
		return fUUID
	}
	return fOther
}

func (mariadb) upsert(_ string, key, cols []string) string {
	m := mariadb{}
	var set []string
	for _, c := range cols {
		if !contains(key, c) {
			set = append(set, m.quote(c)+" = VALUES("+m.quote(c)+")")
		}
	}
	if len(set) == 0 { // every column is the key: nothing to update.
		set = append(set, m.quote(key[0])+" = "+m.quote(key[0]))
	}
	return " ON DUPLICATE KEY UPDATE " + strings.Join(set, ", ")
}

func (mariadb) columnsQuery() string {
	return "SELECT column_name, data_type FROM information_schema.columns " +
		"WHERE table_schema = DATABASE() AND table_name = ?"
}

func (mariadb) addColumn() string { return "ADD COLUMN IF NOT EXISTS" }

// maxParams: the server's limit on a prepared statement's
// placeholders, kept although parameters are interpolated, so a
// statement stays well under max_allowed_packet too.
func (mariadb) maxParams() int { return 65535 }

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}
