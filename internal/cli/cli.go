// Package cli owns Strand's client tools: the `topic`, `produce`,
// `consume`, `group`, `cluster`, `features`, `acl`, `quota` and `user` commands of the strand binary, in the spirit of
// Redpanda's rpk and kcat. They speak only the Kafka protocol (through
// franz-go's kgo and kadm), so they work against any Kafka-compatible
// cluster, not just Strand. The `log` and `storage` commands are
// Strand's own: they talk to one agent's HTTP admin API (see
// internal/agent). `registry` speaks Confluent Schema Registry's REST
// API (registry.go). `sql` is a SQL session with an agent's PostgreSQL
// wire endpoint through pgx (sql.go). `profile` keeps named sets of client options
// (profile.go, options.go); completion.go completes topic and group names.
//
// Every command reads and writes through cobra's In/Out/Err streams and
// honours the context passed to ExecuteContext, so tests run whole commands
// in-process against a fake cluster and SIGINT is plain ctx cancellation.
package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Sentinel errors. Commands wrap them with detail; callers test with
// errors.Is.
var (
	// ErrUsage reports a bad flag or argument, found before any request is
	// sent.
	ErrUsage = errors.New("usage")
	// ErrPartialFailure reports that a command acting on several items
	// (topics, records) completed some of them and failed others; the
	// per-item errors were already printed.
	ErrPartialFailure = errors.New("some operations failed")
	// ErrUnknownTopic reports a topic that the cluster does not have.
	ErrUnknownTopic = errors.New("unknown topic")
)

// EnvBrokers names the environment variable that overrides the default
// --brokers value, so scripts can point every command at a cluster once.
const EnvBrokers = "STRAND_BROKERS"

// DefaultBrokers is where `strand serve` listens with no flags.
const DefaultBrokers = "127.0.0.1:9092"

const (
	defaultTimeout = 10 * time.Second
	clientID       = "strand-cli"
)

// AddCommands adds the client commands (topic, produce, consume, group,
// features, acl, quota, user, log, storage, registry, sql) to root.
func AddCommands(root *cobra.Command) {
	root.AddCommand(NewTopicCommand(), NewProduceCommand(), NewConsumeCommand(), NewGroupCommand(), NewShareGroupCommand(), NewFeaturesCommand(), NewACLCommand(),
		NewQuotaCommand(), NewUserCommand())
	root.AddCommand(NewLogCommand(), NewStorageCommand())
	root.AddCommand(NewRegistryCommand(), NewSQLCommand(), NewConnectCommand())
	root.AddCommand(NewClusterCommand(), NewProfileCommand())
	addCompletions(root)
	noteProfileSecurity(root)
}

// ClientOptions are the connection flags every client command shares.
// They live on each client command rather than on the root so that
// `strand serve --help` does not offer a --brokers flag it would ignore.
type ClientOptions struct {
	// Brokers is a comma-separated list of seed host:port pairs.
	Brokers string
	// Timeout bounds each admin request (topic commands, offset listing)
	// and each produced record's delivery. Zero means no bound.
	Timeout time.Duration
	// Security is TLS and SASL (security.go).
	Security SecurityOptions
	// ClientID is -X client.id (options.go); empty means strand-cli.
	ClientID string

	// profileErr is why the current profile could not be applied
	// (profile.go); it fails NewClient.
	profileErr error
}

// Register adds --brokers, --timeout, the TLS and SASL flags and -X to fs. The --brokers default is
// read from $STRAND_BROKERS when the command tree is built, and the
// current profile's values below the environment (options.go).
func (o *ClientOptions) Register(fs *pflag.FlagSet) {
	def := DefaultBrokers
	if env := strings.TrimSpace(os.Getenv(EnvBrokers)); env != "" {
		def = env
	}
	fs.StringVarP(&o.Brokers, "brokers", "b", def, "comma-separated seed brokers (env "+EnvBrokers+")")
	fs.DurationVar(&o.Timeout, "timeout", defaultTimeout, "bound on each admin request and each record's delivery (0: none)")
	o.Security.Register(fs)
	o.registerOptions(fs)
}

// seeds splits Brokers, dropping blanks so "a:1, b:2," works.
func (o *ClientOptions) seeds() ([]string, error) {
	var seeds []string
	for s := range strings.SplitSeq(o.Brokers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("%w: --brokers is empty", ErrUsage)
	}
	return seeds, nil
}

// NewClient returns a kgo client for the seed brokers with extra options
// applied after the defaults. The caller closes it.
func (o *ClientOptions) NewClient(extra ...kgo.Opt) (*kgo.Client, error) {
	if o.profileErr != nil {
		return nil, o.profileErr
	}
	seeds, err := o.seeds()
	if err != nil {
		return nil, err
	}
	security, err := o.Security.Opts()
	if err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID(cmp.Or(o.ClientID, clientID))}, security...)
	return kgo.NewClient(append(opts, extra...)...)
}

// requestContext bounds one admin call by --timeout, so a dead broker
// address fails the command instead of hanging it.
func (o *ClientOptions) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if o.Timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, o.Timeout)
}

// table writes aligned columns. Cells are written as they come and aligned
// on flush, so a table holds at most one command's output in memory.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	if len(headers) > 0 {
		t.row(toAny(headers)...)
	}
	return t
}

func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	fmt.Fprint(t.tw, "\n")
}

func (t *table) flush() error { return t.tw.Flush() }

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// errText renders a per-item error as the status cell of a table: the
// Kafka error name (e.g. TOPIC_ALREADY_EXISTS) first, so scripts can grep
// it, then the broker's message if it adds anything. A Kafka error with
// a message shows the message instead of the code's generic description,
// which can contradict it (INVALID_PARTITIONS reads "Number of
// partitions is below 1." when the agent said "at most 1000
// partitions").
func errText(err error, brokerMsg string) string {
	var ke *kerr.Error
	if brokerMsg != "" && errors.As(err, &ke) && err.Error() == ke.Error() {
		return ke.Message + ": " + brokerMsg
	}
	s := err.Error()
	if brokerMsg != "" && !strings.Contains(s, brokerMsg) {
		s += " (" + brokerMsg + ")"
	}
	return s
}

// splitKeyValue parses "key=value" flags; the value may itself hold '='.
func splitKeyValue(flag, kv string) (string, string, error) {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return "", "", fmt.Errorf("%w: %s %q: want key=value", ErrUsage, flag, kv)
	}
	return k, v, nil
}
