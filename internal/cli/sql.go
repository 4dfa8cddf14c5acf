// The `sql` command: a SQL session with an agent's SQL endpoint
// (--sql-listen, docs/sql.md) for people without psql. It speaks the
// PostgreSQL wire protocol through pgx, so it works against PostgreSQL
// itself too, which is what its tests compare against.
//
// Statements go over the simple query protocol, one at a time, and are
// printed from the server's text format, as psql does: what the user
// sees is what the server rendered, with no client-side decoding to get
// wrong. -e runs each text as it is (psql -c); -f and the prompt split
// a script with a lexer of PostgreSQL's own rules (sql_split.go).

package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/strandkafka/strand/internal/certs"
	"github.com/strandkafka/strand/internal/sql/parse"
)

// DefaultSQLURL is where `strand serve --sql-listen` is documented to
// listen (docs/sql.md), and the one database it has.
const DefaultSQLURL = "postgres://127.0.0.1:6875/strand"

// ErrSQLFailed reports that statements of -e or -f failed; each error
// was already printed.
var ErrSQLFailed = errors.New("SQL statements failed")

// maxScriptBytes bounds a -f script or a statement typed at the prompt:
// the agent takes no statement longer (internal/sql/parse.MaxQueryBytes).
const maxScriptBytes = 1 << 20

type sqlOptions struct {
	URL          string
	User         string
	PasswordFile string
	TLS          certs.ClientFiles
	Exec         []string
	File         string
	Format       string
	Null         string
	OnError      string
}

// NewSQLCommand returns `strand sql`.
func NewSQLCommand() *cobra.Command {
	var o sqlOptions
	cmd := &cobra.Command{
		Use:   "sql",
		Short: "Run SQL against an agent's SQL endpoint: interactively, -e 'SQL' or -f FILE",
		Long: `Connects to an agent's SQL endpoint (strand serve --sql-listen) or any
PostgreSQL server, and runs SQL: each -e text in turn, the script of -f
(- for stdin), or else a prompt when stdin is a terminal, where a
statement ends with ';' (\q quits). Without a terminal, stdin is read as
a script.

The password comes from --password-file or $STRAND_SQL_PASSWORD (pgx also
reads PGPASSWORD and ~/.pgpass), never from the command line. --tls-*
make TLS required and verified; without them the URL's sslmode rules.

Errors print as psql's do, with the SQLSTATE; with -e or -f a failed
statement makes the exit status non-zero.`,
		Example: `  strand sql -e 'SHOW SOURCES'
  strand sql --url 'postgres://127.0.0.1:6875/strand' --user alice --password-file pw -f views.sql
  strand sql -e 'SELECT * FROM totals' --format csv --null NULL`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSQL(cmd, &o) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.URL, "url", envDefault("sql-url", DefaultSQLURL), "PostgreSQL connection URL or key=value string (env "+envName("sql-url")+")")
	fs.StringVarP(&o.User, "user", "U", envDefault("sql-user", ""), "user to connect as, overriding the URL's (env "+envName("sql-user")+")")
	fs.StringVar(&o.PasswordFile, "password-file", envDefault("sql-password-file", ""), "file holding the password (default: "+envName("sql-password")+")")
	fs.StringVar(&o.TLS.CAFile, "tls-ca", envDefault("tls-ca", ""), "PEM CAs the server's certificate must chain to (env STRAND_TLS_CA)")
	fs.StringVar(&o.TLS.CertFile, "tls-cert", envDefault("tls-cert", ""), "PEM client certificate (env STRAND_TLS_CERT)")
	fs.StringVar(&o.TLS.KeyFile, "tls-key", envDefault("tls-key", ""), "PEM key of --tls-cert (env STRAND_TLS_KEY)")
	fs.StringArrayVarP(&o.Exec, "execute", "e", nil, "SQL to run, sent as it is; repeatable, run in order")
	fs.StringVarP(&o.File, "file", "f", "", "script to run (- for stdin), split into statements at ';'")
	fs.StringVar(&o.Format, "format", sqlFormatText, "output format: text (aligned, as psql's), json or csv")
	fs.StringVar(&o.Null, "null", "", "how text and csv show NULL")
	fs.StringVar(&o.OnError, "on-error", "stop", "after a failed statement of -e or -f: stop or continue")
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{sqlFormatText, sqlFormatJSON, sqlFormatCSV}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("on-error", cobra.FixedCompletions([]string{"stop", "continue"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *sqlOptions) check() error {
	switch o.Format {
	case sqlFormatText, sqlFormatJSON, sqlFormatCSV:
	default:
		return fmt.Errorf("%w: --format %q: want text, json or csv", ErrUsage, o.Format)
	}
	if o.OnError != "stop" && o.OnError != "continue" {
		return fmt.Errorf("%w: --on-error %q: want stop or continue", ErrUsage, o.OnError)
	}
	if len(o.Exec) > 0 && o.File != "" {
		return fmt.Errorf("%w: give -e or -f, not both", ErrUsage)
	}
	return nil
}

// connConfig is pgx's configuration for --url with the user, password
// and TLS asked for.
func (o *sqlOptions) connConfig() (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(strings.TrimSpace(o.URL))
	if err != nil {
		return nil, fmt.Errorf("%w: --url: %v", ErrUsage, err)
	}
	if o.User != "" {
		cfg.User = o.User
	}
	pass, err := secret("password-file", o.PasswordFile, envName("sql-password"))
	if err != nil {
		return nil, err
	}
	if pass != "" {
		cfg.Password = pass
	}
	if o.TLS != (certs.ClientFiles{}) {
		tc, err := certs.ClientConfig(o.TLS)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUsage, err)
		}
		tc.ServerName = cfg.Host
		// Asking for a CA or a client certificate means TLS or nothing:
		// no plaintext fallback (sslmode=prefer's second try).
		cfg.TLSConfig, cfg.Fallbacks = tc, nil
	}
	return cfg, nil
}

func runSQL(cmd *cobra.Command, o *sqlOptions) error {
	if err := o.check(); err != nil {
		return err
	}
	cfg, err := o.connConfig()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	s := &sqlSession{out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), opts: o}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { s.printError((*pgconn.PgError)(n), "") }
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	s.conn = conn.PgConn()

	switch {
	case len(o.Exec) > 0:
		return s.runAll(ctx, o.Exec)
	case o.File != "":
		text, err := readScript(cmd.InOrStdin(), o.File)
		if err != nil {
			return err
		}
		return s.runScript(ctx, text)
	}
	in := cmd.InOrStdin()
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return s.interactive(ctx, newTerminalLines(f, s.out))
	}
	text, err := readScript(in, "-")
	if err != nil {
		return err
	}
	return s.runScript(ctx, text)
}

// readScript reads -f's file, or stdin for "-", up to maxScriptBytes.
func readScript(stdin io.Reader, name string) (string, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return "", fmt.Errorf("%w: -f: %v", ErrUsage, err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxScriptBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", name, err)
	}
	if len(b) > maxScriptBytes {
		return "", fmt.Errorf("%w: script %s is over %d bytes", ErrUsage, name, maxScriptBytes)
	}
	return string(b), nil
}

// sqlSession runs statements on one connection and prints their results.
type sqlSession struct {
	conn   *pgconn.PgConn
	out    io.Writer
	errOut io.Writer
	opts   *sqlOptions
}

// runScript runs a script's statements, cut at its ';' tokens by
// parse.Split (a small lexer of PostgreSQL's quoting and comments, as
// psql's, rather than the grammar's scanner, whose WebAssembly module
// costs 1-3 s and ~300 MB); an unfinished last statement is sent too,
// for the server to say what is wrong with it.
func (s *sqlSession) runScript(ctx context.Context, text string) error {
	return s.runAll(ctx, parse.Split(text))
}

// runAll runs stmts in order, by --on-error, and reports whether any
// failed.
func (s *sqlSession) runAll(ctx context.Context, stmts []string) error {
	failed := false
	for _, q := range stmts {
		if err := s.run(ctx, q); err != nil {
			if !isStatementError(err) {
				return err
			}
			failed = true
			if s.opts.OnError == "stop" {
				break
			}
		}
	}
	if failed {
		return ErrSQLFailed
	}
	return nil
}

// isStatementError tells a statement the server refused, after which
// the session goes on, from a broken connection or a local write error.
func isStatementError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// run sends q (which may hold several statements, as -e's text may) and
// prints each result. A statement's error is printed here and returned.
func (s *sqlSession) run(ctx context.Context, q string) error {
	mrr := s.conn.Exec(ctx, q)
	var werr error
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		w := newResultWriter(s.out, s.opts.Format, s.opts.Null)
		if fields := rr.FieldDescriptions(); len(fields) > 0 {
			werr = w.header(fields)
		}
		for rr.NextRow() {
			if werr == nil {
				werr = w.row(rr.Values())
			}
		}
		tag, err := rr.Close()
		if err != nil {
			break // mrr.Close reports it
		}
		if werr == nil {
			werr = w.end(tag)
		}
	}
	err := mrr.Close()
	if err != nil {
		s.printError(err, q)
		return err
	}
	return werr
}

// printError prints err as psql does with VERBOSITY verbose's first
// line (the SQLSTATE before the message), then DETAIL and HINT, and a
// caret under the error's position in q.
func (s *sqlSession) printError(err error, q string) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		fmt.Fprintf(s.errOut, "error: %v\n", err)
		return
	}
	sev := cmp.Or(pe.Severity, "ERROR")
	if pe.Code != "" {
		fmt.Fprintf(s.errOut, "%s:  %s: %s\n", sev, pe.Code, pe.Message)
	} else {
		fmt.Fprintf(s.errOut, "%s:  %s\n", sev, pe.Message)
	}
	if pe.Position > 0 && q != "" {
		fmt.Fprint(s.errOut, caret(q, int(pe.Position)))
	}
	if pe.Detail != "" {
		fmt.Fprintf(s.errOut, "DETAIL:  %s\n", pe.Detail)
	}
	if pe.Hint != "" {
		fmt.Fprintf(s.errOut, "HINT:  %s\n", pe.Hint)
	}
}

// caret is psql's pointer at an error position: the statement's line
// holding it, prefixed "LINE n: ", and a '^' under the character.
// PostgreSQL counts positions in characters from 1.
func caret(q string, pos int) string {
	runes := []rune(q)
	if pos < 1 || pos > len(runes)+1 {
		return ""
	}
	at := pos - 1
	line, start := 1, 0
	for i := 0; i < at && i < len(runes); i++ {
		if runes[i] == '\n' {
			line, start = line+1, i+1
		}
	}
	end := start
	for end < len(runes) && runes[end] != '\n' {
		end++
	}
	prefix := fmt.Sprintf("LINE %d: ", line)
	text := strings.ReplaceAll(string(runes[start:end]), "\t", " ")
	return fmt.Sprintf("%s%s\n%s^\n", prefix, text, strings.Repeat(" ", len(prefix)+at-start))
}

// lineReader is the prompt: x/term's line editor on a terminal, a fake
// in tests. ReadLine returns io.EOF at the end of input (Ctrl-D).
type lineReader interface {
	SetPrompt(prompt string)
	ReadLine() (string, error)
}

// Prompts, as psql's: a new statement, and a statement going on.
const (
	promptNew  = "strand=> "
	promptMore = "strand-> "
)

// interactive reads statements at a prompt until \q or end of input,
// running each as soon as a line ends it with ';'.
func (s *sqlSession) interactive(ctx context.Context, lr lineReader) error {
	var buf strings.Builder
	for ctx.Err() == nil {
		if buf.Len() == 0 {
			lr.SetPrompt(promptNew)
		} else {
			lr.SetPrompt(promptMore)
		}
		line, err := lr.ReadLine()
		if errors.Is(err, io.EOF) {
			fmt.Fprintln(s.out)
			return nil
		}
		if err != nil {
			return err
		}
		if buf.Len() == 0 {
			switch strings.TrimSpace(line) {
			case `\q`, "quit", "exit":
				return nil
			case "":
				continue
			}
		}
		buf.WriteString(line)
		buf.WriteString("\n")
		if buf.Len() > maxScriptBytes {
			fmt.Fprintf(s.errOut, "error: statement over %d bytes, discarded\n", maxScriptBytes)
			buf.Reset()
			continue
		}
		stmts, tail, _ := parse.SplitTail(buf.String())
		buf.Reset()
		if tail != "" {
			buf.WriteString(tail)
			buf.WriteString("\n")
		}
		for _, q := range stmts {
			// A refused statement was printed; the session goes on.
			if err := s.run(ctx, q); err != nil && !isStatementError(err) {
				return err
			}
		}
	}
	return ctx.Err()
}

// terminalLines reads lines with x/term's line editor (and its
// history). The terminal is raw only while a line is read, so Ctrl-C
// during a statement is the process's signal, which cancels the
// command's context and ends the session.
type terminalLines struct {
	f *os.File
	t *term.Terminal
}

func newTerminalLines(f *os.File, out io.Writer) *terminalLines {
	rw := struct {
		io.Reader
		io.Writer
	}{f, out}
	return &terminalLines{f: f, t: term.NewTerminal(rw, promptNew)}
}

func (l *terminalLines) SetPrompt(p string) { l.t.SetPrompt(p) }

func (l *terminalLines) ReadLine() (string, error) {
	old, err := term.MakeRaw(int(l.f.Fd()))
	if err != nil {
		return "", err
	}
	defer term.Restore(int(l.f.Fd()), old)
	return l.t.ReadLine()
}
