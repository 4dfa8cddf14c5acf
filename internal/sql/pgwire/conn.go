package pgwire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
)

// Per-connection bounds: named prepared statements and open portals.
// PostgreSQL has none; a client that leaks statements here gets 54000
// rather than growing the agent's memory.
const (
	maxPrepared = 1024
	maxPortals  = 256
)

// flushBytes is how much row data is buffered before it is written, so
// a large result streams instead of growing the send buffer.
const flushBytes = 64 << 10

// conn is one client connection.
type conn struct {
	srv    *Server
	nc     net.Conn
	be     *pgproto3.Backend
	pid    uint32
	secret [4]byte
	// counted says the server counts it as a session.
	counted bool
	user    string
	sess    Session
	types   *pgtype.Map

	prepared map[string]*prepared
	portals  map[string]*portal

	cancelMu struct {
		sync.Mutex
		cancel context.CancelCauseFunc
	}
	ctx   context.Context
	stop  context.CancelFunc
	isTLS bool
}

// prepared is a Parse'd statement: nil stmt for an empty query string.
type prepared struct {
	stmt Statement
}

// portal is a bound statement, started at its first Execute.
type portal struct {
	stmt    Statement
	args    []any
	formats []int16 // one per column
	rows    Rows
	done    bool
	tag     string
}

func newConn(s *Server, nc net.Conn, pid uint32) *conn {
	ctx, stop := context.WithCancel(context.Background())
	return &conn{
		srv:      s,
		nc:       nc,
		pid:      pid,
		secret:   newSecret(),
		types:    pgtype.NewMap(),
		prepared: make(map[string]*prepared),
		portals:  make(map[string]*portal),
		ctx:      ctx,
		stop:     stop,
	}
}

// shutdown tells the client the server is going away and closes the
// socket, which ends serve.
func (c *conn) shutdown() {
	c.cancelRunning()
	c.stop()
	// The serving goroutine may be writing; a write deadline makes the
	// socket close promptly either way.
	c.nc.Close()
}

func (c *conn) cancelRunning() {
	c.cancelMu.Lock()
	defer c.cancelMu.Unlock()
	if c.cancelMu.cancel != nil {
		c.cancelMu.cancel(errQueryCanceled)
	}
}

// statement returns a context for one statement, cancelable by a
// CancelRequest, and its release.
func (c *conn) statement() (context.Context, func()) {
	ctx, cancel := statementContext(c.ctx)
	c.cancelMu.Lock()
	c.cancelMu.cancel = cancel
	c.cancelMu.Unlock()
	return ctx, func() {
		c.cancelMu.Lock()
		c.cancelMu.cancel = nil
		c.cancelMu.Unlock()
		cancel(nil)
	}
}

func (c *conn) serve() {
	defer c.nc.Close()
	defer c.stop()
	log := c.srv.cfg.Logger.With("remote", c.nc.RemoteAddr().String())
	if err := c.startup(); err != nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, net.ErrClosed) {
			log.Debug("sql connection refused", "err", err)
		}
		return
	}
	defer c.sess.Close()
	defer c.closePortals()
	if err := c.loop(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, net.ErrClosed) {
		log.Debug("sql connection ended", "user", c.user, "err", err)
	}
}

// fatal sends e as a FATAL error and flushes; the caller then closes.
func (c *conn) fatal(e *Error) error {
	c.be.Send(response(e, true))
	c.be.Flush()
	return e
}

// startup runs the connection from accept to ReadyForQuery: TLS,
// startup message, authentication, session.
func (c *conn) startup() error {
	deadline := c.srv.cfg.Clock.Now().Add(c.srv.cfg.StartupTimeout)
	c.nc.SetDeadline(deadline)
	c.be = pgproto3.NewBackend(c.nc, c.nc)
	var sm *pgproto3.StartupMessage
	for sm == nil {
		msg, err := c.be.ReceiveStartupMessage()
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.SSLRequest:
			if c.srv.cfg.TLS == nil || c.isTLS {
				if _, err := c.nc.Write([]byte{'N'}); err != nil {
					return err
				}
				continue
			}
			if _, err := c.nc.Write([]byte{'S'}); err != nil {
				return err
			}
			tc := tls.Server(c.nc, c.srv.cfg.TLS)
			if err := tc.Handshake(); err != nil {
				return fmt.Errorf("tls handshake: %w", err)
			}
			c.nc, c.isTLS = tc, true
			c.be = pgproto3.NewBackend(c.nc, c.nc)
		case *pgproto3.GSSEncRequest:
			if _, err := c.nc.Write([]byte{'N'}); err != nil {
				return err
			}
		case *pgproto3.CancelRequest:
			c.srv.cancel(m.ProcessID, m.SecretKey)
			return io.EOF
		case *pgproto3.StartupMessage:
			sm = m
		}
	}
	c.be.SetMaxBodyLen(c.srv.cfg.MaxMessageBytes)
	if sm.ProtocolVersion != pgproto3.ProtocolVersion30 {
		// 3.2 (PostgreSQL 18) is newer than this server speaks; the
		// client goes on in 3.0 when told so.
		c.be.Send(&pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0})
	}
	c.user = sm.Parameters["user"]
	if c.user == "" {
		return c.fatal(Errorf(CodeInvalidAuthorization, "no PostgreSQL user name specified in startup packet"))
	}
	if !c.srv.admit(c) {
		return c.fatal(Errorf(CodeTooManyConnections, "sorry, too many clients already"))
	}
	switch method, reason := c.srv.cfg.Auth.Method(); method {
	case AuthTrust:
	case AuthSCRAM:
		if err := scramAuth(c.be, c.srv.cfg.Auth, c.user); err != nil {
			if e, ok := isClientError(err); ok {
				return c.fatal(e)
			}
			return err
		}
	default:
		return c.fatal(Errorf(CodeInvalidAuthorization, "%s", reason))
	}
	c.be.Send(&pgproto3.AuthenticationOk{})

	opts, err := startupOptions(sm.Parameters)
	if err != nil {
		return c.fatal(asError(nil, err))
	}
	host := ""
	if ap, err := netip.ParseAddrPort(c.nc.RemoteAddr().String()); err == nil {
		host = ap.Addr().Unmap().String()
	}
	sess, err := c.srv.cfg.Engine.NewSession(c.ctx, SessionInfo{
		User:     c.user,
		Host:     host,
		Database: orDefault(sm.Parameters["database"], c.user),
		Options:  opts,
		Client:   c,
	})
	if err != nil {
		return c.fatal(asError(nil, err))
	}
	c.sess = sess
	c.be.Send(&pgproto3.BackendKeyData{ProcessID: c.pid, SecretKey: c.secret[:]})
	c.be.Send(&pgproto3.ReadyForQuery{TxStatus: sess.TxStatus()})
	if err := c.be.Flush(); err != nil {
		return err
	}
	c.nc.SetDeadline(time.Time{})
	return nil
}

func orDefault(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// startupOptions are the StartupMessage's parameters other than user
// and database, with the settings of its options parameter
// ("-c name=value" or "--name=value", space-separated, backslash
// escaping a space) folded in.
func startupOptions(params map[string]string) (map[string]string, error) {
	opts := make(map[string]string, len(params))
	for k, v := range params {
		switch k {
		case "user", "database", "options", "replication":
		default:
			opts[k] = v
		}
	}
	if r := params["replication"]; r != "" && r != "false" && r != "off" && r != "0" {
		return nil, NotSupported("replication connections are not supported")
	}
	words := splitOptions(params["options"])
	for i := 0; i < len(words); i++ {
		w := words[i]
		var setting string
		switch {
		case w == "-c" && i+1 < len(words):
			i++
			setting = words[i]
		case strings.HasPrefix(w, "-c"):
			setting = w[2:]
		case strings.HasPrefix(w, "--"):
			setting = w[2:]
		default:
			return nil, Errorf(CodeProtocolViolation, "invalid command-line argument for server process: %s", w)
		}
		name, value, ok := strings.Cut(setting, "=")
		if !ok {
			return nil, Errorf(CodeSyntaxError, "-c %s requires a value", setting)
		}
		opts[strings.ReplaceAll(name, "-", "_")] = value
	}
	return opts, nil
}

func splitOptions(s string) []string {
	var words []string
	var cur strings.Builder
	esc := false
	for _, r := range s {
		switch {
		case esc:
			cur.WriteRune(r)
			esc = false
		case r == '\\':
			esc = true
		case r == ' ' || r == '\t':
			if cur.Len() > 0 {
				words = append(words, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		words = append(words, cur.String())
	}
	return words
}

// ParameterStatus implements Client.
func (c *conn) ParameterStatus(name, value string) {
	c.be.Send(&pgproto3.ParameterStatus{Name: name, Value: value})
}

// Notice implements Client.
func (c *conn) Notice(severity, code, message string) {
	c.be.Send(&pgproto3.NoticeResponse{Severity: severity, SeverityUnlocalized: severity, Code: code, Message: message})
}

// loop reads and answers messages until Terminate or a connection error.
func (c *conn) loop() error {
	// skipping is set by an error in the extended protocol: messages are
	// discarded until Sync.
	skipping := false
	unflushed := 0
	for {
		msg, err := c.be.Receive()
		if err != nil {
			var tooBig *pgproto3.ExceededMaxBodyLenErr
			if errors.As(err, &tooBig) {
				return c.fatal(Errorf(CodeProtocolViolation, "message of %d bytes exceeds the limit of %d bytes", tooBig.ActualBodyLen, tooBig.MaxExpectedBodyLen))
			}
			if strings.HasPrefix(err.Error(), "unknown message type") {
				return c.fatal(Errorf(CodeProtocolViolation, "%v", err))
			}
			return err
		}
		if skipping {
			if _, ok := msg.(*pgproto3.Sync); !ok {
				if _, ok := msg.(*pgproto3.Terminate); !ok {
					continue
				}
			}
		}
		quit, err := c.handle(msg, &skipping)
		if quit {
			return err
		}
		if err != nil {
			c.sendError(nil, err)
			skipping = true
		}
		// As PostgreSQL does, the extended protocol's replies go out at
		// Sync or Flush (clients send one before they wait), the simple
		// protocol's after ReadyForQuery: a lookup's answer is one write
		// and one wake-up of the client, not one per message (four for
		// Bind, Describe, Execute, Sync), each a wait for a processor
		// on a busy agent. unflushed bounds what a client pipelining
		// without Sync makes the buffer hold (rows flush by flushBytes).
		unflushed++
		switch msg.(type) {
		case *pgproto3.Query, *pgproto3.Sync, *pgproto3.Flush:
		default:
			if unflushed < maxUnflushedMessages {
				continue
			}
		}
		unflushed = 0
		if err := c.be.Flush(); err != nil {
			return err
		}
	}
}

// handle answers one message; quit says the connection ends (with err,
// nil for Terminate). A panic in a statement's handler is that
// statement's internal error (XX000) and is logged with its stack: one
// bad statement fails, not the agent and every session on it, as a
// Kafka handler's panic closes one connection (kafka/conn.go).
func (c *conn) handle(msg pgproto3.FrontendMessage, skipping *bool) (quit bool, err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		c.srv.cfg.Logger.Error("sql: statement panic", "user", c.user, "message", fmt.Sprintf("%T", msg),
			"panic", v, "stack", string(debug.Stack()))
		quit, err = false, Errorf(CodeInternalError, "internal error: %v", v)
		if _, ok := msg.(*pgproto3.Query); ok {
			// The simple protocol has no Sync to wait for: fail the
			// query and be ready for the next one.
			c.sendError(nil, err)
			c.readyForQuery()
			err = nil
		}
	}()
	switch m := msg.(type) {
	case *pgproto3.Query:
		c.simpleQuery(m.String)
		c.readyForQuery()
	case *pgproto3.Parse:
		err = c.parse(m)
	case *pgproto3.Bind:
		err = c.bind(m)
	case *pgproto3.Describe:
		err = c.describe(m)
	case *pgproto3.Execute:
		err = c.execute(m)
	case *pgproto3.Close:
		err = c.close(m)
	case *pgproto3.Sync:
		*skipping = false
		if c.sess.TxStatus() == 'I' {
			// The implicit transaction ends at Sync, and with it
			// every portal, as in PostgreSQL.
			c.closePortals()
		}
		c.readyForQuery()
	case *pgproto3.Flush:
	case *pgproto3.Terminate:
		return true, nil
	case *pgproto3.FunctionCall:
		err = NotSupported("the function call protocol is not supported")
	case *pgproto3.CopyData, *pgproto3.CopyDone, *pgproto3.CopyFail:
		// PostgreSQL ignores these outside COPY.
	default:
		return true, c.fatal(Errorf(CodeProtocolViolation, "unexpected message %T", msg))
	}
	return false, err
}

// maxUnflushedMessages is how many messages' replies wait for a Sync
// or Flush before they are sent anyway.
const maxUnflushedMessages = 64

func (c *conn) readyForQuery() {
	c.be.Send(&pgproto3.ReadyForQuery{TxStatus: c.sess.TxStatus()})
}

// sendError sends err as an ErrorResponse and fails an open transaction.
func (c *conn) sendError(ctx context.Context, err error) {
	c.be.Send(response(asError(ctx, err), false))
	c.sess.Fail()
}

// simpleQuery runs the statements of a Query message in order, stopping
// at the first error.
func (c *conn) simpleQuery(sql string) {
	// A Query closes the unnamed statement and portal.
	delete(c.prepared, "")
	c.closePortal("")
	ctx, done := c.statement()
	defer done()
	stmts, err := c.sess.Prepare(ctx, sql, nil)
	if err != nil {
		c.sendError(ctx, err)
		return
	}
	if len(stmts) == 0 {
		c.be.Send(&pgproto3.EmptyQueryResponse{})
		return
	}
	for _, st := range stmts {
		if n := len(st.Params()); n > 0 {
			c.sendError(ctx, Errorf(CodeUndefinedParameter, "there is no parameter $1"))
			return
		}
		cols := st.Columns()
		if cols != nil {
			c.be.Send(rowDescription(cols, nil))
		}
		rows, err := st.Start(ctx, nil)
		if err != nil {
			c.sendError(ctx, err)
			return
		}
		_, tag, err := c.sendRows(ctx, rows, cols, nil, 0)
		rows.Close()
		if err != nil {
			c.sendError(ctx, err)
			return
		}
		c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
	}
}

// sendRows sends up to max rows (0: all) as DataRows in formats (nil:
// text), flushing as the buffer fills. It reports whether rows ended,
// and then the tag.
func (c *conn) sendRows(ctx context.Context, rows Rows, cols []Column, formats []int16, max int64) (ended bool, tag string, err error) {
	var buffered int
	streaming, _ := rows.(StreamingRows)
	for n := int64(0); max <= 0 || n < max; n++ {
		if streaming != nil && !streaming.Ready() {
			// The RowDescription and the rows so far go out before
			// waiting for the next.
			if err := c.be.Flush(); err != nil {
				return false, "", err
			}
			buffered = 0
		}
		row, ok, err := rows.Next(ctx)
		if err != nil {
			return false, "", err
		}
		if !ok {
			return true, rows.Tag(), nil
		}
		if len(row) != len(cols) {
			return false, "", fmt.Errorf("engine returned %d values for %d columns", len(row), len(cols))
		}
		values := make([][]byte, len(row))
		for i, v := range row {
			if v == nil {
				continue
			}
			f := int16(0)
			if formats != nil {
				f = formats[i]
			}
			buf, err := c.types.Encode(cols[i].Type, f, v, nil)
			if err != nil {
				return false, "", fmt.Errorf("encoding column %q: %w", cols[i].Name, err)
			}
			if buf == nil {
				buf = []byte{}
			}
			values[i] = buf
			buffered += len(buf)
		}
		c.be.Send(&pgproto3.DataRow{Values: values})
		if buffered >= flushBytes {
			if err := c.be.Flush(); err != nil {
				return false, "", err
			}
			buffered = 0
		}
	}
	return false, "", nil
}

func rowDescription(cols []Column, formats []int16) *pgproto3.RowDescription {
	fields := make([]pgproto3.FieldDescription, len(cols))
	for i, col := range cols {
		fields[i] = pgproto3.FieldDescription{
			Name:         []byte(col.Name),
			DataTypeOID:  col.Type,
			DataTypeSize: col.TypeSize,
			TypeModifier: col.TypeMod,
		}
		if formats != nil {
			fields[i].Format = formats[i]
		}
	}
	return &pgproto3.RowDescription{Fields: fields}
}

func (c *conn) parse(m *pgproto3.Parse) error {
	if _, ok := c.prepared[m.Name]; ok && m.Name != "" {
		return Errorf(CodeDuplicatePreparedStatement, "prepared statement %q already exists", m.Name)
	}
	if len(c.prepared) >= maxPrepared && m.Name != "" {
		return Errorf(CodeProgramLimitExceeded, "a connection keeps at most %d prepared statements; close some", maxPrepared)
	}
	ctx, done := c.statement()
	defer done()
	stmts, err := c.sess.Prepare(ctx, m.Query, m.ParameterOIDs)
	if err != nil {
		return err
	}
	if len(stmts) > 1 {
		return Errorf(CodeSyntaxError, "cannot insert multiple commands into a prepared statement")
	}
	p := &prepared{}
	if len(stmts) == 1 {
		p.stmt = stmts[0]
	}
	c.prepared[m.Name] = p
	c.be.Send(&pgproto3.ParseComplete{})
	return nil
}

func (c *conn) bind(m *pgproto3.Bind) error {
	p, ok := c.prepared[m.PreparedStatement]
	if !ok {
		return Errorf(CodeInvalidSQLStatementName, "prepared statement %q does not exist", m.PreparedStatement)
	}
	if _, ok := c.portals[m.DestinationPortal]; ok && m.DestinationPortal != "" {
		return Errorf(CodeDuplicateCursor, "portal %q already exists", m.DestinationPortal)
	}
	if len(c.portals) >= maxPortals {
		return Errorf(CodeProgramLimitExceeded, "a connection keeps at most %d portals; close some", maxPortals)
	}
	var params []uint32
	var cols []Column
	if p.stmt != nil {
		params, cols = p.stmt.Params(), p.stmt.Columns()
	}
	if len(m.Parameters) != len(params) {
		return Errorf(CodeProtocolViolation, "bind message supplies %d parameters, but prepared statement %q requires %d", len(m.Parameters), m.PreparedStatement, len(params))
	}
	paramFormats, err := formatsFor(m.ParameterFormatCodes, len(params), "parameter")
	if err != nil {
		return err
	}
	args := make([]any, len(params))
	for i, raw := range m.Parameters {
		if raw == nil {
			continue
		}
		if args[i], err = c.decodeParam(params[i], paramFormats[i], raw); err != nil {
			if paramFormats[i] == pgtype.BinaryFormatCode {
				return Errorf(CodeInvalidBinaryRepresentation, "incorrect binary data format in bind parameter %d", i+1)
			}
			e := Errorf(CodeInvalidTextRepresentation, "invalid input syntax for type %s: %q", c.typeName(params[i]), raw)
			e.Detail = err.Error()
			return e
		}
	}
	resultFormats, err := formatsFor(m.ResultFormatCodes, len(cols), "result")
	if err != nil {
		return err
	}
	c.closePortal(m.DestinationPortal)
	c.portals[m.DestinationPortal] = &portal{stmt: p.stmt, args: args, formats: resultFormats}
	c.be.Send(&pgproto3.BindComplete{})
	return nil
}

func (c *conn) decodeParam(oid uint32, format int16, raw []byte) (any, error) {
	t, ok := c.types.TypeForOID(oid)
	if !ok {
		// Types pgtype does not know arrive as their text.
		if format == pgtype.TextFormatCode {
			return string(raw), nil
		}
		return nil, fmt.Errorf("no binary format known for type %d", oid)
	}
	return t.Codec.DecodeValue(c.types, oid, format, raw)
}

func (c *conn) typeName(oid uint32) string {
	if t, ok := c.types.TypeForOID(oid); ok {
		return t.Name
	}
	return fmt.Sprint(oid)
}

// formatsFor expands a Bind's format codes to one per value: none means
// text for all, one applies to all, otherwise one each.
func formatsFor(codes []int16, n int, what string) ([]int16, error) {
	out := make([]int16, n)
	switch len(codes) {
	case 0:
	case 1:
		for i := range out {
			out[i] = codes[0]
		}
	case n:
		copy(out, codes)
	default:
		return nil, Errorf(CodeProtocolViolation, "bind message has %d %s formats but %d %ss", len(codes), what, n, what)
	}
	for _, f := range out {
		if f != pgtype.TextFormatCode && f != pgtype.BinaryFormatCode {
			return nil, Errorf(CodeProtocolViolation, "unsupported format code: %d", f)
		}
	}
	return out, nil
}

func (c *conn) describe(m *pgproto3.Describe) error {
	switch m.ObjectType {
	case 'S':
		p, ok := c.prepared[m.Name]
		if !ok {
			return Errorf(CodeInvalidSQLStatementName, "prepared statement %q does not exist", m.Name)
		}
		if p.stmt == nil {
			c.be.Send(&pgproto3.ParameterDescription{})
			c.be.Send(&pgproto3.NoData{})
			return nil
		}
		c.be.Send(&pgproto3.ParameterDescription{ParameterOIDs: p.stmt.Params()})
		if cols := p.stmt.Columns(); cols != nil {
			c.be.Send(rowDescription(cols, nil))
		} else {
			c.be.Send(&pgproto3.NoData{})
		}
	case 'P':
		p, ok := c.portals[m.Name]
		if !ok {
			return Errorf(CodeInvalidCursorName, "portal %q does not exist", m.Name)
		}
		if p.stmt == nil || p.stmt.Columns() == nil {
			c.be.Send(&pgproto3.NoData{})
			return nil
		}
		c.be.Send(rowDescription(p.stmt.Columns(), p.formats))
	default:
		return Errorf(CodeProtocolViolation, "invalid DESCRIBE message subtype %d", m.ObjectType)
	}
	return nil
}

func (c *conn) execute(m *pgproto3.Execute) error {
	p, ok := c.portals[m.Portal]
	if !ok {
		return Errorf(CodeInvalidCursorName, "portal %q does not exist", m.Portal)
	}
	if p.stmt == nil {
		c.be.Send(&pgproto3.EmptyQueryResponse{})
		return nil
	}
	if p.done {
		c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(p.tag)})
		return nil
	}
	ctx, done := c.statement()
	defer done()
	if p.rows == nil {
		rows, err := p.stmt.Start(ctx, p.args)
		if err != nil {
			return asError(ctx, err)
		}
		p.rows = rows
	}
	ended, tag, err := c.sendRows(ctx, p.rows, p.stmt.Columns(), p.formats, int64(m.MaxRows))
	if err != nil {
		c.closePortal(m.Portal)
		return asError(ctx, err)
	}
	if !ended {
		c.be.Send(&pgproto3.PortalSuspended{})
		return nil
	}
	p.rows.Close()
	p.rows, p.done, p.tag = nil, true, tag
	c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
	return nil
}

func (c *conn) close(m *pgproto3.Close) error {
	switch m.ObjectType {
	case 'S':
		delete(c.prepared, m.Name)
	case 'P':
		c.closePortal(m.Name)
	default:
		return Errorf(CodeProtocolViolation, "invalid CLOSE message subtype %d", m.ObjectType)
	}
	c.be.Send(&pgproto3.CloseComplete{})
	return nil
}

func (c *conn) closePortal(name string) {
	if p, ok := c.portals[name]; ok {
		if p.rows != nil {
			p.rows.Close()
		}
		delete(c.portals, name)
	}
}

func (c *conn) closePortals() {
	for name := range c.portals {
		c.closePortal(name)
	}
}
