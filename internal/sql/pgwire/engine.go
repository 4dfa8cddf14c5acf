package pgwire

import "context"

// The engine is what runs statements; this package only speaks the
// protocol. The interfaces are small on purpose: the minimal engine
// (package sql/engine) implements them today, the planner over views
// will tomorrow, and the wire layer does not change.
//
// Values cross the boundary as Go values of the types pgx's pgtype
// encodes and decodes for a column's or parameter's type OID: int16,
// int32, int64, float32, float64, string, bool, pgtype.Numeric, []byte,
// and nil for NULL. The wire layer decodes parameters into them and
// encodes rows from them, in text or binary as the client asked.

// Engine opens a session for each authenticated connection.
type Engine interface {
	// NewSession opens the session of an authenticated connection. The
	// session reports its settings through info.Client before it
	// returns (server_version and the rest of ParameterStatus).
	NewSession(ctx context.Context, info SessionInfo) (Session, error)
}

// SessionInfo is what the connection knows of its client.
type SessionInfo struct {
	// User is the authenticated user; Database the database asked for.
	User, Database string
	// Host is the client's address as netip.Addr.String formats it (the
	// form ACL hosts take), "" when it is not an IP connection.
	Host string
	// Options are the StartupMessage's other parameters
	// (application_name, client_encoding, ...) and the "-c name=value"
	// settings of its options parameter, to apply as SET would.
	Options map[string]string
	// Client sends what the session has to tell the client outside a
	// statement's result. Valid for the session's life.
	Client Client
}

// Client is the connection as a session sees it. Its methods buffer
// messages that go out with the statement's result; they are called
// only from the goroutine running the session's methods.
type Client interface {
	// ParameterStatus reports a setting's value: at start for every
	// reported setting, later when a statement changes one.
	ParameterStatus(name, value string)
	// Notice sends a NoticeResponse (severity NOTICE or WARNING).
	Notice(severity, code, message string)
}

// Session is one connection's state: its settings, its transaction and,
// later, its catalog view. A session is used by one goroutine at a time.
type Session interface {
	// Prepare parses sql into its statements (the simple protocol may
	// send several; Parse sends one) and types them. paramTypes are the
	// OIDs the client gave for $1.. (0 or missing: the session infers
	// them). A statement that cannot be run gets an *Error here, not at
	// Start, so Parse can fail as PostgreSQL's does.
	Prepare(ctx context.Context, sql string, paramTypes []uint32) ([]Statement, error)
	// TxStatus is the transaction status ReadyForQuery reports: 'I'
	// idle, 'T' in a transaction block, 'E' in a failed one.
	TxStatus() byte
	// Fail marks an open transaction block failed: the client was sent
	// an error while it was open.
	Fail()
	// Close ends the session; it is not used afterwards.
	Close()
}

// Statement is one prepared statement. Its Params and Columns are fixed
// when it is prepared; it may be started any number of times.
type Statement interface {
	// Params are the type OIDs of $1, $2, ...
	Params() []uint32
	// Columns describe the rows it returns; nil for a statement that
	// returns none (SET, BEGIN).
	Columns() []Column
	// Start runs the statement with args (one per Params entry, NULL as
	// nil). The statement may run until its rows are read; ctx is
	// canceled by a CancelRequest, and the Rows' Next then fails.
	Start(ctx context.Context, args []any) (Rows, error)
}

// Rows is a running statement's result, read by the wire layer as the
// client's Execute limits allow. Close may be called before the end.
type Rows interface {
	// Next returns the next row (one value per column, owned by the
	// caller), or ok false at the end.
	Next(ctx context.Context) (row []any, ok bool, err error)
	// Tag is the CommandComplete tag ("SELECT 3", "SET"), valid once
	// Next has returned ok false.
	Tag() string
	Close()
}

// StreamingRows is a Rows whose Next may wait for rows that do not
// exist yet (SUBSCRIBE): before a Next that would wait, the wire layer
// sends what it has buffered, so the client sees each row when it is
// made rather than when a buffer fills.
type StreamingRows interface {
	Rows
	// Ready reports whether Next would return without waiting.
	Ready() bool
}

// Column is one result column's description.
type Column struct {
	Name string
	// Type is the column's type OID; TypeSize its pg_type.typlen (-1:
	// variable); TypeMod its type modifier (-1: none).
	Type     uint32
	TypeSize int16
	TypeMod  int32
}
