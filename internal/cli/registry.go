// The `registry` command: a schema registry's subjects, schemas,
// compatibility levels and modes, in the manner of rpk's `registry`
// commands. It speaks Confluent Schema Registry's REST API through
// franz-go's client (pkg/sr), so it works against Strand's registry
// (internal/schemareg) and Confluent's alike.
//
// Connection flags live on the group (--registry-url, basic auth or a
// bearer token, the CA and client certificate for https://), each with
// a STRAND_* variable, as the admin commands' do; secrets come from a
// file or the environment, never from the command line.

package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/strandkafka/strand/internal/certs"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/schemareg"
)

var (
	// ErrRegistry reports a refusal from the schema registry; the error
	// is a *RegistryError with Confluent's code and message.
	ErrRegistry = errors.New("schema registry refused")
	// ErrIncompatible reports that `registry compat` found the schema
	// incompatible; the reasons were already printed.
	ErrIncompatible = errors.New("schema is incompatible")
)

// DefaultRegistryURL is where Confluent's registry listens by default.
const DefaultRegistryURL = "http://127.0.0.1:8081"

const (
	// maxRegistryResponseBytes bounds what is read of one answer: a
	// schema is at most meta.MaxSchemaBytes, JSON-escaped in a body.
	maxRegistryResponseBytes = 16 << 20
	// maxShownErrorBytes bounds how much of a body that is not
	// Confluent's JSON error an error message quotes.
	maxShownErrorBytes = 512
)

// RegistryError is a refusal as the registry answered it: the HTTP
// status, Confluent's error code (40401, 42201...; 0 when the body was
// not Confluent's JSON) and its message.
type RegistryError struct {
	Status  int
	Code    int
	Message string
}

func (e *RegistryError) Error() string {
	if e.Code == 0 {
		return fmt.Sprintf("schema registry: HTTP %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
	}
	name := ""
	if se := sr.ErrorForCode(e.Code); se != sr.ErrUnknown {
		name = " " + se.Name
	}
	return fmt.Sprintf("schema registry: error %d%s: %s", e.Code, name, e.Message)
}

func (e *RegistryError) Is(target error) bool { return target == ErrRegistry }

// registryErr turns the client's *sr.ResponseError into a
// *RegistryError; other errors (the network's) pass as they are.
func registryErr(err error) error {
	var re *sr.ResponseError
	if !errors.As(err, &re) {
		return err
	}
	out := &RegistryError{Status: re.StatusCode, Code: re.ErrorCode, Message: re.Message}
	if out.Code == 0 {
		raw := string(re.Raw)
		if len(raw) > maxShownErrorBytes {
			raw = raw[:maxShownErrorBytes] + "..."
		}
		out.Message = raw
	}
	return out
}

// registryOptions are the registry commands' connection flags.
type registryOptions struct {
	URL string
	// User is the basic auth user; its password is in PasswordFile or
	// $STRAND_REGISTRY_PASSWORD.
	User         string
	PasswordFile string
	// TokenFile holds a bearer token; $STRAND_REGISTRY_TOKEN is used
	// when it is empty.
	TokenFile string
	// TLS is the CA and client certificate for https://.
	TLS     certs.ClientFiles
	Timeout time.Duration
}

func (o *registryOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.URL, "registry-url", envDefault("registry-url", DefaultRegistryURL), "the schema registry's URL, http:// or https:// (env "+envName("registry-url")+")")
	fs.StringVar(&o.User, "registry-user", envDefault("registry-user", ""), "basic auth user (env "+envName("registry-user")+"); the password comes from --registry-password-file or "+envName("registry-password"))
	fs.StringVar(&o.PasswordFile, "registry-password-file", envDefault("registry-password-file", ""), "file holding the basic auth password (env "+envName("registry-password-file")+")")
	fs.StringVar(&o.TokenFile, "registry-token-file", envDefault("registry-token-file", ""), "file holding a bearer token (default: the token in "+envName("registry-token")+")")
	fs.StringVar(&o.TLS.CAFile, "tls-ca", envDefault("tls-ca", ""), "https: PEM CAs the registry's certificate must chain to (env STRAND_TLS_CA)")
	fs.StringVar(&o.TLS.CertFile, "tls-cert", envDefault("tls-cert", ""), "https: PEM client certificate (env STRAND_TLS_CERT)")
	fs.StringVar(&o.TLS.KeyFile, "tls-key", envDefault("tls-key", ""), "https: PEM key of --tls-cert (env STRAND_TLS_KEY)")
	fs.DurationVar(&o.Timeout, "timeout", defaultTimeout, "bound on the command's requests (0: none)")
}

// restTarget is a REST endpoint the CLI calls (the schema registry,
// Kafka Connect): its URL, a transport with the TLS asked for, and the
// credentials, basic (user and password) or a bearer token.
type restTarget struct {
	url               *url.URL
	tr                *http.Transport
	user, pass, token string
}

// openREST checks --<name>-url and reads the credentials of
// --<name>-user, --<name>-password-file and --<name>-token-file (or
// their environment variables). Nothing is sent yet.
func openREST(name, rawURL string, tlsFiles certs.ClientFiles, user, passwordFile, tokenFile string) (restTarget, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return restTarget{}, fmt.Errorf("%w: --%s-url %q: want http://host:port or https://host:port", ErrUsage, name, rawURL)
	}
	t := restTarget{url: u, tr: http.DefaultTransport.(*http.Transport).Clone(), user: user}
	if u.Scheme == "https" {
		cfg, err := certs.ClientConfig(tlsFiles)
		if err != nil {
			return restTarget{}, fmt.Errorf("%w: %v", ErrUsage, err)
		}
		t.tr.TLSClientConfig = cfg
	}
	if t.pass, err = secret(name+"-password-file", passwordFile, envName(name+"-password")); err != nil {
		return restTarget{}, err
	}
	if t.token, err = secret(name+"-token-file", tokenFile, envName(name+"-token")); err != nil {
		return restTarget{}, err
	}
	switch {
	case user != "" && t.token != "":
		return restTarget{}, fmt.Errorf("%w: give --%s-user or a bearer token, not both", ErrUsage, name)
	case user == "" && passwordFile != "":
		return restTarget{}, fmt.Errorf("%w: --%s-password-file needs --%s-user", ErrUsage, name, name)
	}
	return t, nil
}

// secret is the first line of file, else the environment variable env.
func secret(flag, file, env string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv(env)), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%w: --%s: %v", ErrUsage, flag, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimRight(line, "\r"), nil
}

// client returns a client for --registry-url with the credentials and
// TLS asked for. Nothing is sent yet.
func (o *registryOptions) client() (*sr.Client, error) {
	t, err := openREST("registry", o.URL, o.TLS, o.User, o.PasswordFile, o.TokenFile)
	if err != nil {
		return nil, err
	}
	opts := []sr.ClientOpt{
		sr.URLs(t.url.String()), sr.UserAgent(clientID),
		// No client timeout: --timeout bounds the command's context.
		sr.HTTPClient(&http.Client{Transport: boundedBodies{t.tr}}),
	}
	switch {
	case t.user != "":
		opts = append(opts, sr.BasicAuth(t.user, t.pass))
	case t.token != "":
		opts = append(opts, sr.BearerToken(t.token))
	}
	return sr.NewClient(opts...)
}

// open checks --format, then returns a client and the context its
// requests run in, bounded by --timeout.
func (o *registryOptions) open(ctx context.Context, format string) (*sr.Client, context.Context, context.CancelFunc, error) {
	if err := CheckOutputFormat(format); err != nil {
		return nil, nil, nil, err
	}
	cl, err := o.client()
	if err != nil {
		return nil, nil, nil, err
	}
	if o.Timeout <= 0 {
		ctx, cancel := context.WithCancel(ctx)
		return cl, ctx, cancel, nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	return cl, ctx, cancel, nil
}

// boundedBodies fails the reading of an answer over
// maxRegistryResponseBytes: the client reads whole bodies.
type boundedBodies struct{ rt http.RoundTripper }

func (b boundedBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.rt.RoundTrip(req)
	if err == nil {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxRegistryResponseBytes}
	}
	return resp, err
}

var errResponseTooLarge = fmt.Errorf("answer over %d bytes", maxRegistryResponseBytes)

type limitedBody struct {
	io.ReadCloser
	left int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	// One byte past the bound tells a body at the bound from a longer one.
	n, err := l.ReadCloser.Read(p[:min(int64(len(p)), l.left+1)])
	if l.left -= int64(n); l.left < 0 {
		return n, errResponseTooLarge
	}
	return n, err
}

// NewRegistryCommand returns `strand registry`.
func NewRegistryCommand() *cobra.Command {
	o := new(registryOptions)
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Schema registry: subjects, schemas, compatibility levels and modes (Confluent's REST API)",
		Long: "Subjects, schemas, compatibility levels and modes of a schema registry, through\n" +
			"Confluent Schema Registry's REST API at --registry-url (Strand's agents serve it; so does\n" +
			"Confluent's registry). For example:\n\n" +
			"    strand registry subject register orders-value --schema-file order.avsc\n" +
			"    strand registry compat orders-value --schema-file order-v2.avsc --verbose\n" +
			"    strand registry subject get orders-value --version latest\n" +
			"    strand registry config set orders-value --level FULL\n\n" +
			"Authentication: --registry-user with the password in --registry-password-file or\n" +
			envName("registry-password") + ", or a bearer token in --registry-token-file or " + envName("registry-token") + ".\n" +
			"A refusal prints Confluent's error code and message (e.g. error 40401 SUBJECT_NOT_FOUND).",
		Args: cobra.NoArgs,
	}
	o.register(cmd.PersistentFlags())
	subject := &cobra.Command{Use: "subject", Short: "List, show, register and delete subjects' schemas", Args: cobra.NoArgs}
	subject.AddCommand(newRegistrySubjectListCmd(o), newRegistrySubjectGetCmd(o), newRegistrySubjectRegisterCmd(o), newRegistrySubjectDeleteCmd(o))
	schema := &cobra.Command{Use: "schema", Short: "Show schemas by their global id", Args: cobra.NoArgs}
	schema.AddCommand(newRegistrySchemaGetCmd(o))
	config := &cobra.Command{Use: "config", Short: "Show and set compatibility levels, global or a subject's", Args: cobra.NoArgs}
	config.AddCommand(newRegistryConfigGetCmd(o), newRegistryConfigSetCmd(o), newRegistryConfigDeleteCmd(o))
	mode := &cobra.Command{Use: "mode", Short: "Show and set modes (READWRITE, READONLY, READONLY_OVERRIDE, IMPORT)", Args: cobra.NoArgs}
	mode.AddCommand(newRegistryModeGetCmd(o), newRegistryModeSetCmd(o))
	cmd.AddCommand(subject, schema, newRegistryCompatCmd(o), config, mode)
	return cmd
}

// RegistryReference is a schema reference as the commands print it.
type RegistryReference struct {
	Name    string `json:"name" yaml:"name"`
	Subject string `json:"subject" yaml:"subject"`
	Version int    `json:"version" yaml:"version"`
}

// RegistrySchema is a subject's version (`subject get`, `subject
// register`) or a schema by id (`schema get`, whose Subject and Version
// are empty and UsedBy lists where it is registered).
type RegistrySchema struct {
	Subject    string              `json:"subject,omitempty" yaml:"subject,omitempty"`
	Version    int                 `json:"version,omitempty" yaml:"version,omitempty"`
	ID         int                 `json:"id" yaml:"id"`
	Type       string              `json:"type" yaml:"type"`
	References []RegistryReference `json:"references,omitempty" yaml:"references,omitempty"`
	UsedBy     []sr.SubjectVersion `json:"used_by,omitempty" yaml:"used_by,omitempty"`
	Schema     string              `json:"schema,omitempty" yaml:"schema,omitempty"`
}

func registrySchemaOf(s sr.Schema) RegistrySchema {
	out := RegistrySchema{Type: s.Type.String(), Schema: s.Schema}
	for _, r := range s.References {
		out.References = append(out.References, RegistryReference(r))
	}
	return out
}

// printRegistrySchema is the text of a RegistrySchema: its fields, then
// the schema, indented if it is JSON.
func printRegistrySchema(w io.Writer, s RegistrySchema) error {
	t := newTable(w)
	if s.Subject != "" {
		t.row("subject", s.Subject)
		t.row("version", s.Version)
	}
	t.row("id", s.ID)
	t.row("type", s.Type)
	for _, r := range s.References {
		t.row("reference", fmt.Sprintf("%s=%s:%d", r.Name, r.Subject, r.Version))
	}
	for _, u := range s.UsedBy {
		t.row("used by", fmt.Sprintf("%s version %d", u.Subject, u.Version))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if s.Schema == "" {
		return nil
	}
	_, err := fmt.Fprintf(w, "\n%s\n", strings.TrimRight(schemareg.Indent(s.Schema), "\n"))
	return err
}

func newRegistrySubjectListCmd(o *registryOptions) *cobra.Command {
	var (
		deleted bool
		prefix  string
		format  *string
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List subjects",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, cancel, err := o.open(cmd.Context(), *format)
			if err != nil {
				return err
			}
			defer cancel()
			var params []sr.Param
			if deleted {
				params = append(params, sr.ShowDeleted)
			}
			if prefix != "" {
				params = append(params, sr.SubjectPrefix(prefix))
			}
			subjects, err := cl.Subjects(sr.WithParams(ctx, params...))
			if err != nil {
				return registryErr(err)
			}
			if subjects == nil {
				subjects = []string{}
			}
			slices.Sort(subjects)
			return WriteOutput(cmd.OutOrStdout(), *format, subjects, func(w io.Writer) error {
				t := newTable(w, "SUBJECT")
				for _, s := range subjects {
					t.row(s)
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().BoolVar(&deleted, "deleted", false, "include soft-deleted subjects")
	cmd.Flags().StringVar(&prefix, "prefix", "", "only subjects starting with this")
	format = addOutputFlag(cmd)
	return cmd
}

// parseRegistryVersion reads --version: a positive number or latest (-1).
func parseRegistryVersion(s string) (int, error) {
	if strings.EqualFold(s, "latest") {
		return -1, nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: --version %q: want a positive number or latest", ErrUsage, s)
	}
	return int(n), nil
}

func newRegistrySubjectGetCmd(o *registryOptions) *cobra.Command {
	var (
		version             string
		schemaOnly, deleted bool
		format              *string
	)
	cmd := &cobra.Command{
		Use:   "get SUBJECT",
		Short: "Show a subject's version (default: the latest): its id, type, references and schema",
		Long: "Show a subject's version (default: the latest): its id, type, references and schema.\n" +
			"--schema-only prints the schema's text alone, as stored, for a file or a pipe.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := parseRegistryVersion(version)
			if err != nil {
				return err
			}
			cl, ctx, cancel, err := o.open(cmd.Context(), *format)
			if err != nil {
				return err
			}
			defer cancel()
			if deleted {
				ctx = sr.WithParams(ctx, sr.ShowDeleted)
			}
			ss, err := cl.SchemaByVersion(ctx, args[0], v)
			if err != nil {
				return registryErr(err)
			}
			if schemaOnly {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), ss.Schema.Schema)
				return err
			}
			out := registrySchemaOf(ss.Schema)
			out.Subject, out.Version, out.ID = ss.Subject, ss.Version, ss.ID
			return WriteOutput(cmd.OutOrStdout(), *format, out, func(w io.Writer) error { return printRegistrySchema(w, out) })
		},
	}
	cmd.Flags().StringVar(&version, "version", "latest", "the version: a number or latest")
	cmd.Flags().BoolVar(&schemaOnly, "schema-only", false, "print only the schema's text")
	cmd.Flags().BoolVar(&deleted, "deleted", false, "a soft-deleted version may be shown too")
	format = addOutputFlag(cmd)
	return cmd
}

// schemaFlags are a schema to send: its file, type and references.
type schemaFlags struct {
	file, typ string
	refs      []string
}

func (f *schemaFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.file, "schema-file", "", "file holding the schema (- for standard input; required)")
	fs.StringVar(&f.typ, "type", "", "AVRO, PROTOBUF or JSON (default: PROTOBUF for a .proto file, else AVRO)")
	fs.StringArrayVar(&f.refs, "reference", nil, "a reference the schema uses, name=subject:version (repeatable)")
}

// schema reads the file and checks the flags; stdin is "-"'s source.
func (f *schemaFlags) schema(stdin io.Reader) (sr.Schema, error) {
	var s sr.Schema
	typ := f.typ
	if typ == "" && strings.EqualFold(filepath.Ext(f.file), ".proto") {
		typ = "PROTOBUF"
	}
	if err := s.Type.UnmarshalText([]byte(typ)); err != nil {
		return s, fmt.Errorf("%w: --type %q: want AVRO, PROTOBUF or JSON", ErrUsage, f.typ)
	}
	for _, ref := range f.refs {
		r, err := parseReference(ref)
		if err != nil {
			return s, err
		}
		s.References = append(s.References, r)
	}
	if f.file == "" {
		return s, fmt.Errorf("%w: --schema-file is required", ErrUsage)
	}
	var rd io.Reader = stdin
	if f.file != "-" {
		file, err := os.Open(f.file)
		if err != nil {
			return s, fmt.Errorf("%w: --schema-file: %v", ErrUsage, err)
		}
		defer file.Close()
		rd = file
	}
	b, err := io.ReadAll(io.LimitReader(rd, meta.MaxSchemaBytes+1))
	if err != nil {
		return s, fmt.Errorf("--schema-file %s: %w", f.file, err)
	}
	switch {
	case len(b) > meta.MaxSchemaBytes:
		return s, fmt.Errorf("%w: --schema-file %s: over %d bytes, the most a registry takes", ErrUsage, f.file, meta.MaxSchemaBytes)
	case len(bytes.TrimSpace(b)) == 0:
		return s, fmt.Errorf("%w: --schema-file %s is empty", ErrUsage, f.file)
	}
	s.Schema = string(b)
	return s, nil
}

// parseReference reads name=subject:version. The version follows the
// last colon and the subject the last '=' before it, so a name may hold
// both (a JSON Schema's $ref URL).
func parseReference(s string) (sr.SchemaReference, error) {
	bad := fmt.Errorf("%w: --reference %q: want name=subject:version", ErrUsage, s)
	rest, ver, ok := cutLast(s, ":")
	if !ok {
		return sr.SchemaReference{}, bad
	}
	name, subject, ok := cutLast(rest, "=")
	if !ok || name == "" || subject == "" {
		return sr.SchemaReference{}, bad
	}
	v, err := strconv.ParseInt(ver, 10, 32)
	if err != nil || v <= 0 {
		return sr.SchemaReference{}, fmt.Errorf("%w: --reference %q: the version must be a positive number", ErrUsage, s)
	}
	return sr.SchemaReference{Name: name, Subject: subject, Version: int(v)}, nil
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func newRegistrySubjectRegisterCmd(o *registryOptions) *cobra.Command {
	var (
		sf        schemaFlags
		normalize bool
		format    *string
	)
	cmd := &cobra.Command{
		Use:   "register SUBJECT --schema-file FILE",
		Short: "Register a schema under a subject (a new version unless the subject holds it already)",
		Long: "Register a schema under a subject: a new version, checked against the subject's\n" +
			"compatibility level, unless the subject already holds the schema (then its version).\n" +
			"Prints the subject's version and the schema's global id.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := sf.schema(cmd.InOrStdin())
			if err != nil {
				return err
			}
			cl, ctx, cancel, err := o.open(cmd.Context(), *format)
			if err != nil {
				return err
			}
			defer cancel()
			if normalize {
				ctx = sr.WithParams(ctx, sr.Normalize)
			}
			id, err := cl.RegisterSchema(ctx, args[0], s, -1, -1)
			if err != nil {
				return registryErr(err)
			}
			// The registration answers the id alone; the version is
			// the subject's that holds it.
			got, err := cl.LookupSchema(ctx, args[0], s)
			if err != nil {
				return fmt.Errorf("registered as id %d, but looking up its version: %w", id, registryErr(err))
			}
			out := RegistrySchema{Subject: args[0], Version: got.Version, ID: id, Type: s.Type.String()}
			return WriteOutput(cmd.OutOrStdout(), *format, out, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "registered %s version %d, id %d\n", out.Subject, out.Version, out.ID)
				return err
			})
		},
	}
	sf.register(cmd.Flags())
	cmd.Flags().BoolVar(&normalize, "normalize", false, "normalize the schema first (Confluent's normalize=true)")
	format = addOutputFlag(cmd)
	return cmd
}

// RegistryDeleted is what `subject delete` deleted.
type RegistryDeleted struct {
	Subject   string `json:"subject" yaml:"subject"`
	Versions  []int  `json:"versions" yaml:"versions"`
	Permanent bool   `json:"permanent" yaml:"permanent"`
}

func newRegistrySubjectDeleteCmd(o *registryOptions) *cobra.Command {
	var (
		version   string
		permanent bool
		format    *string
	)
	cmd := &cobra.Command{
		Use:   "delete SUBJECT",
		Short: "Delete a subject's versions (all, or --version), soft or --permanent",
		Long: "Delete a subject's versions: all of them, or the one --version names. A soft delete\n" +
			"(the default) hides them and keeps their ids readable; --permanent removes versions\n" +
			"that were soft-deleted first, as Confluent's registry requires (error 40405 or 40407\n" +
			"otherwise).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v := 0
			if version != "" {
				var err error
				if v, err = parseRegistryVersion(version); err != nil {
					return err
				}
			}
			cl, ctx, cancel, err := o.open(cmd.Context(), *format)
			if err != nil {
				return err
			}
			defer cancel()
			out := RegistryDeleted{Subject: args[0], Permanent: permanent}
			how := sr.SoftDelete
			if permanent {
				how = sr.HardDelete
			}
			if v == 0 {
				out.Versions, err = cl.DeleteSubject(ctx, args[0], how)
			} else {
				// DeleteSchema drops the answer, the version deleted,
				// which "latest" needs to say which it was.
				var n int
				if permanent {
					ctx = sr.WithParams(ctx, sr.RawParams(url.Values{"permanent": {"true"}}))
				}
				path := "/subjects/" + url.PathEscape(args[0]) + "/versions/" + strconv.Itoa(v)
				if v == -1 {
					path = "/subjects/" + url.PathEscape(args[0]) + "/versions/latest"
				}
				err = cl.Do(ctx, http.MethodDelete, path, nil, &n)
				out.Versions = []int{n}
			}
			if err != nil {
				return registryErr(err)
			}
			return WriteOutput(cmd.OutOrStdout(), *format, out, func(w io.Writer) error {
				how := "soft-deleted"
				if permanent {
					how = "permanently deleted"
				}
				vs := make([]string, len(out.Versions))
				for i, n := range out.Versions {
					vs[i] = strconv.Itoa(n)
				}
				_, err := fmt.Fprintf(w, "%s %s versions %s\n", how, out.Subject, strings.Join(vs, ", "))
				return err
			})
		},
	}
	cmd.Flags().StringVar(&version, "version", "", "delete only this version: a number or latest")
	cmd.Flags().BoolVar(&permanent, "permanent", false, "delete permanently (the versions must be soft-deleted first)")
	format = addOutputFlag(cmd)
	return cmd
}

func newRegistrySchemaGetCmd(o *registryOptions) *cobra.Command {
	var (
		schemaOnly bool
		format     *string
	)
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Show the schema with a global id, and the subjects' versions that use it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 32)
			if err != nil || id <= 0 {
				return fmt.Errorf("%w: schema id %q: want a positive number", ErrUsage, args[0])
			}
			cl, ctx, cancel, err := o.open(cmd.Context(), *format)
			if err != nil {
				return err
			}
			defer cancel()
			s, err := cl.SchemaByID(ctx, int(id))
			if err != nil {
				return registryErr(err)
			}
			if schemaOnly {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), s.Schema)
				return err
			}
			out := registrySchemaOf(s)
			out.ID = int(id)
			if out.UsedBy, err = cl.SchemaVersionsByID(ctx, int(id)); err != nil {
				return registryErr(err)
			}
			return WriteOutput(cmd.OutOrStdout(), *format, out, func(w io.Writer) error { return printRegistrySchema(w, out) })
		},
	}
	cmd.Flags().BoolVar(&schemaOnly, "schema-only", false, "print only the schema's text")
	format = addOutputFlag(cmd)
	return cmd
}

// RegistryCompat is `compat`'s answer.
type RegistryCompat struct {
	Compatible bool     `json:"compatible" yaml:"compatible"`
	Messages   []string `json:"messages,omitempty" yaml:"messages,omitempty"`
}

func newRegistryCompatCmd(o *registryOptions) *cobra.Command {
	var (
		sf                 schemaFlags
		version            string
		verbose, normalize bool
		format             *string
	)
	cmd := &cobra.Command{
		Use:   "compat SUBJECT --schema-file FILE",
		Short: "Check a schema against a subject's version (default: latest) at the subject's level",
		Long: "Check a schema against a subject's version (default: the latest) at the subject's\n" +
			"compatibility level, without registering it. Prints compatible, or incompatible and\n" +
			"(with --verbose) the registry's reasons, and then exits non-zero: scripts and CI can\n" +
			"gate a schema change on it. A subject with no versions takes any schema.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := parseRegistryVersion(version)
			if err != nil {
				return err
			}
			s, err := sf.schema(cmd.InOrStdin())
			if err != nil {
				return err
			}
			cl, ctx, cancel, err := o.open(cmd.Context(), *format)
			if err != nil {
				return err
			}
			defer cancel()
			var params []sr.Param
			if verbose {
				params = append(params, sr.Verbose)
			}
			if normalize {
				params = append(params, sr.Normalize)
			}
			res, err := cl.CheckCompatibility(sr.WithParams(ctx, params...), args[0], v, s)
			if err != nil {
				return registryErr(err)
			}
			out := RegistryCompat{Compatible: res.Is, Messages: res.Messages}
			err = WriteOutput(cmd.OutOrStdout(), *format, out, func(w io.Writer) error {
				if out.Compatible {
					_, err := fmt.Fprintln(w, "compatible")
					return err
				}
				if !verbose {
					_, err := fmt.Fprintln(w, "incompatible (--verbose says why)")
					return err
				}
				fmt.Fprintln(w, "incompatible:")
				for _, m := range out.Messages {
					fmt.Fprintf(w, "  - %s\n", m)
				}
				return nil
			})
			if err == nil && !out.Compatible {
				err = fmt.Errorf("%w with %s", ErrIncompatible, args[0])
			}
			return err
		},
	}
	sf.register(cmd.Flags())
	cmd.Flags().StringVar(&version, "version", "latest", "the version to check against: a number or latest")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "print why the schema is incompatible")
	cmd.Flags().BoolVar(&normalize, "normalize", false, "normalize the schema first")
	format = addOutputFlag(cmd)
	return cmd
}
