package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/certs"
)

// ErrAgent reports that the agent answered an admin request with an
// error; the message is the agent's.
var ErrAgent = errors.New("agent refused")

// DefaultAdminHTTP is where `strand serve` serves HTTP with no flags.
const DefaultAdminHTTP = agent.DefaultHTTPListen

const (
	// maxAdminResponseBytes bounds what the log commands read of an
	// answer: a chain is at most 1 MiB of JSON.
	maxAdminResponseBytes = 8 << 20
	// defaultMigrateTimeout is above the agent's own bound on a
	// migration, so the agent's error, not ours, reports a slow one.
	defaultMigrateTimeout = 5 * time.Minute
)

// adminOptions are the flags of the commands that talk to one agent's
// HTTP admin API rather than Kafka.
type adminOptions struct {
	// HTTP is the agent's HTTP address, host:port, or https://host:port
	// for an agent serving --http-tls.
	HTTP    string
	Timeout time.Duration
	JSON    bool
	// TokenFile holds the bearer token of the agent's
	// --admin-token-file; $STRAND_ADMIN_TOKEN is used when it is empty.
	TokenFile string
	// TLS is the CA and client certificate for https://.
	TLS certs.ClientFiles
}

func (o *adminOptions) register(fs *pflag.FlagSet, timeout time.Duration) {
	fs.StringVar(&o.HTTP, "http", DefaultAdminHTTP, "the agent's HTTP address, host:port (its --http-listen), or https://host:port with --http-tls")
	fs.StringVar(&o.TokenFile, "admin-token-file", envDefault("admin-token-file", ""), "file holding the agent's admin bearer token (default: the token in STRAND_ADMIN_TOKEN)")
	fs.StringVar(&o.TLS.CAFile, "tls-ca", envDefault("tls-ca", ""), "https: PEM CAs the agent's certificate must chain to (env STRAND_TLS_CA)")
	fs.StringVar(&o.TLS.CertFile, "tls-cert", envDefault("tls-cert", ""), "https: PEM client certificate (env STRAND_TLS_CERT)")
	fs.StringVar(&o.TLS.KeyFile, "tls-key", envDefault("tls-key", ""), "https: PEM key of --tls-cert (env STRAND_TLS_KEY)")
	fs.DurationVar(&o.Timeout, "timeout", timeout, "bound on the request (0: none)")
	fs.BoolVar(&o.JSON, "json", false, "print the agent's JSON answer")
}

// do sends one request and decodes a 200 answer into out.
func (o *adminOptions) do(ctx context.Context, method, path string, body, out any) error {
	if strings.TrimSpace(o.HTTP) == "" {
		return fmt.Errorf("%w: --http is empty", ErrUsage)
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	client := http.DefaultClient
	u := "http://" + strings.TrimPrefix(o.HTTP, "http://") + path
	if rest, ok := strings.CutPrefix(o.HTTP, "https://"); ok {
		cfg, err := certs.ClientConfig(o.TLS)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		u = "https://" + rest + path
		client = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("%w: --http %q: %v", ErrUsage, o.HTTP, err)
	}
	if body != nil || method == http.MethodPost {
		// The agent takes a mutating call only as JSON, body or not: a
		// page of another site cannot send that from a browser.
		req.Header.Set("Content-Type", "application/json")
	}
	token, err := o.token()
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminResponseBytes))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	if resp.StatusCode != http.StatusOK {
		var eb agent.ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
			return fmt.Errorf("%w (%s): %s", ErrAgent, resp.Status, eb.Error)
		}
		return fmt.Errorf("%w (%s): %s", ErrAgent, resp.Status, strings.TrimSpace(string(data)))
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, u, err)
	}
	return nil
}

// token is the admin bearer token: --admin-token-file's, else
// $STRAND_ADMIN_TOKEN, else none.
func (o *adminOptions) token() (string, error) {
	if o.TokenFile == "" {
		return strings.TrimSpace(os.Getenv("STRAND_ADMIN_TOKEN")), nil
	}
	b, err := os.ReadFile(o.TokenFile)
	if err != nil {
		return "", fmt.Errorf("%w: --admin-token-file: %v", ErrUsage, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// NewLogCommand returns `strand log`: the shared log's status and its
// live migration, through one agent's HTTP address.
func NewLogCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "log",
		Short: "Show and move the shared log (through an agent's HTTP address)",
		Long: `Show and move the shared log. These commands talk to one running agent
through its HTTP address (--http, default ` + DefaultAdminHTTP + `), not
through Kafka.`,
	}
	cmd.AddCommand(newLogStatusCommand(), newLogMigrateCommand(), newLogSnapshotCommand())
	return cmd
}

func newLogStatusCommand() *cobra.Command {
	var o adminOptions
	var format *string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the log's chain of segments, tail, trim point, newest snapshot and each agent's applied position",
		Long: "Show the log's chain of segments, tail, trim point, newest snapshot and each agent's\n" +
			"applied position. --format json (or --json) prints the agent's answer as it is;\n" +
			"--format yaml prints it with the same field names.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.JSON {
				*format = OutputJSON
			}
			if err := CheckOutputFormat(*format); err != nil {
				return err
			}
			var st agent.LogStatus
			if err := o.do(cmd.Context(), http.MethodGet, agent.PathLogStatus, nil, &st); err != nil {
				return err
			}
			return WriteOutput(cmd.OutOrStdout(), *format, jsonShaped{st}, func(w io.Writer) error {
				return printLogStatus(w, st, time.Now())
			})
		},
	}
	o.register(cmd.Flags(), defaultTimeout)
	format = addOutputFlag(cmd)
	return cmd
}

func newLogMigrateCommand() *cobra.Command {
	var (
		o  adminOptions
		to string
	)
	cmd := &cobra.Command{
		Use:   "migrate --to URL",
		Short: "Move the log onto a new loglet, on any backend, while agents keep serving",
		Long: `Move the log onto a new loglet while agents keep serving: the agent seals
the active segment and starts a new one at its tail on the loglet --to
names, which must be new (empty). The command returns when the migration is
complete and prints the new chain. Examples of --to:

  postgres://user@host:5432/db?log=strand/seg-1   (password: PGPASSWORD or .pgpass)
  etcd://host:2379,host2:2379/strand/seg-1
  file:///var/lib/strand/log/seg-1                (the agent's machine)

The URL is stored in the chain, so leave passwords out of it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(to) == "" {
				return fmt.Errorf("%w: --to is required", ErrUsage)
			}
			var res agent.MigrateResult
			if err := o.do(cmd.Context(), http.MethodPost, agent.PathLogMigrate, agent.MigrateRequest{To: to}, &res); err != nil {
				return err
			}
			if o.JSON {
				return printJSON(cmd.OutOrStdout(), res)
			}
			w := cmd.OutOrStdout()
			if res.NewChain.Version == res.OldChain.Version {
				// The chain's URL, whose password the agent hid.
				fmt.Fprintf(w, "the log is already on %s\n\n", activeURL(res.NewChain))
				return printChain(w, res.NewChain)
			}
			fmt.Fprintf(w, "migrated in %v: sealed at %d, chain version %d -> %d\n\n",
				res.DurationNS.Round(time.Microsecond), res.SealedTail, res.OldChain.Version, res.NewChain.Version)
			return printChain(w, res.NewChain)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "loglet URL of the new segment (required)")
	o.register(cmd.Flags(), defaultMigrateTimeout)
	return cmd
}

func newLogSnapshotCommand() *cobra.Command {
	var o adminOptions
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Snapshot the agent's metadata into the object store now and trim the log below it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var res agent.SnapshotTakenStatus
			if err := o.do(cmd.Context(), http.MethodPost, agent.PathSnapshot, nil, &res); err != nil {
				return err
			}
			if o.JSON {
				return printJSON(cmd.OutOrStdout(), res)
			}
			t := newTable(cmd.OutOrStdout())
			t.row("position", res.Snapshot.Pos)
			t.row("key", res.Snapshot.Key)
			t.row("size", fmt.Sprintf("%d files, %s (%d files, %s uploaded)",
				res.Snapshot.Files, byteSize(res.Snapshot.Bytes), res.UploadedFiles, byteSize(res.UploadedBytes)))
			if h := res.TrimHeldBy; h != nil {
				t.row("trim point", fmt.Sprintf("%d (held back by node %d, agent %s, at applied %d)", res.TrimPoint, h.NodeID, h.AgentID, h.Applied))
			} else {
				t.row("trim point", res.TrimPoint)
			}
			t.row("took", res.DurationNS.Round(time.Microsecond))
			return t.flush()
		},
	}
	o.register(cmd.Flags(), defaultMigrateTimeout)
	return cmd
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printLogStatus renders st for a human; now dates the snapshot's age.
func printLogStatus(w io.Writer, st agent.LogStatus, now time.Time) error {
	t := newTable(w)
	tail := fmt.Sprint(st.Tail)
	if st.Sealed {
		tail += " (active segment sealed: a migration is under way)"
	}
	t.row("tail", tail)
	t.row("trim point", st.TrimPoint)
	switch {
	case st.Snapshot != nil:
		s := st.Snapshot
		t.row("snapshot", fmt.Sprintf("position %d, %d files, %s, taken %s (%v ago)",
			s.Pos, s.Files, byteSize(s.Bytes), s.CreatedAt.Format(time.RFC3339), now.Sub(s.CreatedAt).Round(time.Second)))
		t.row("snapshot key", s.Key)
	case st.SnapshotError != "":
		t.row("snapshot", "unknown: "+st.SnapshotError)
	default:
		t.row("snapshot", "none")
	}
	t.row("agent", fmt.Sprintf("writer %s, incarnation %d", st.Agent.WriterID, st.Agent.Incarnation))
	t.row("applied", fmt.Sprintf("%d (%d behind the tail)", st.Agent.Applied, st.Tail-min(st.Agent.Applied, st.Tail)))
	if err := t.flush(); err != nil {
		return err
	}
	if len(st.Agents) > 0 {
		fmt.Fprintln(w)
		if err := printAgents(w, st.Agents, st.Tail); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nchain version %d\n", st.Chain.Version)
	return printChain(w, st.Chain)
}

// printAgents renders the agent table: the applied positions are what
// each agent's newest lease renewal reported, so they lag a little.
func printAgents(w io.Writer, as []agent.AgentLease, tail uint64) error {
	t := newTable(w, "NODE", "AGENT", "ADDRESS", "APPLIED", "BEHIND", "LEASE")
	for _, a := range as {
		lease := "expired " + a.Expires.Format(time.RFC3339)
		if a.Live {
			lease = "live until " + a.Expires.Format(time.RFC3339)
		}
		t.row(a.NodeID, a.AgentID, net.JoinHostPort(a.Host, strconv.Itoa(int(a.Port))), a.Applied, tail-min(a.Applied, tail), lease)
	}
	return t.flush()
}

func printChain(w io.Writer, c agent.ChainStatus) error {
	t := newTable(w, "SEGMENT", "START", "END", "ENTRIES", "STATE", "URL")
	for i, s := range c.Segments {
		state := "sealed"
		if !s.Sealed {
			state = "active"
		}
		t.row(i, s.Start, s.End, s.End-min(s.Start, s.End), state, s.URL)
	}
	return t.flush()
}

func activeURL(c agent.ChainStatus) string {
	if len(c.Segments) == 0 {
		return "(no segment)"
	}
	return c.Segments[len(c.Segments)-1].URL
}

// byteSize formats n in binary units.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
