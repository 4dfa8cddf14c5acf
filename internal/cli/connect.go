// The `connect` command: connectors through Kafka Connect's REST API
// (list, describe, create -f FILE, pause, resume, restart, delete), so
// it works against Strand's agents (internal/connect) and a Connect
// cluster alike.
//
// Connection flags are the registry commands' in kind (--connect-url,
// basic auth or a bearer token, the CA and client certificate for
// https://), each with a STRAND_* variable; secrets come from a file or
// the environment, never from the command line.

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strandkafka/strand/internal/certs"
)

// ErrConnect reports a refusal from the Connect REST API; the error is
// a *ConnectError.
var ErrConnect = errors.New("connect refused")

// DefaultConnectURL is where Connect listens by default.
const DefaultConnectURL = "http://127.0.0.1:8083"

// maxConnectResponseBytes bounds one answer: a connector's config is at
// most 256 KiB, a list of every connector's status a few MiB.
const maxConnectResponseBytes = 16 << 20

// ConnectError is a refusal as Connect answered it.
type ConnectError struct {
	Status  int
	Message string
}

func (e *ConnectError) Error() string {
	return fmt.Sprintf("connect: HTTP %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

func (e *ConnectError) Is(target error) bool { return target == ErrConnect }

type connectOptions struct {
	URL          string
	User         string
	PasswordFile string
	TokenFile    string
	TLS          certs.ClientFiles
	Timeout      time.Duration
}

// connectClient sends requests to --connect-url.
type connectClient struct {
	base       string
	hc         *http.Client
	user, pass string
	token      string
}

func (o *connectOptions) client() (*connectClient, error) {
	t, err := openREST("connect", o.URL, o.TLS, o.User, o.PasswordFile, o.TokenFile)
	if err != nil {
		return nil, err
	}
	return &connectClient{base: strings.TrimRight(t.url.String(), "/"), hc: &http.Client{Transport: t.tr},
		user: t.user, pass: t.pass, token: t.token}, nil
}

// do sends a request with body (JSON, if not nil) and decodes the answer
// into out (if not nil).
func (c *connectClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", clientID)
	switch {
	case c.user != "":
		req.SetBasicAuth(c.user, c.pass)
	case c.token != "":
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxConnectResponseBytes+1))
	if err != nil {
		return err
	}
	if len(b) > maxConnectResponseBytes {
		return fmt.Errorf("connect: answer over %d bytes", maxConnectResponseBytes)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Message string `json:"message"`
		}
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Message != "" {
			msg = e.Message
		} else if len(msg) > maxShownErrorBytes {
			msg = msg[:maxShownErrorBytes] + "..."
		}
		return &ConnectError{Status: resp.StatusCode, Message: msg}
	}
	if out != nil && len(b) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (o *connectOptions) open(ctx context.Context) (*connectClient, context.Context, context.CancelFunc, error) {
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

// ConnectorStatus is Connect's status of one connector.
type ConnectorStatus struct {
	Name      string `json:"name" yaml:"name"`
	Type      string `json:"type" yaml:"type"`
	Connector struct {
		State    string `json:"state" yaml:"state"`
		WorkerID string `json:"worker_id" yaml:"worker_id"`
	} `json:"connector" yaml:"connector"`
	Tasks []struct {
		ID       int    `json:"id" yaml:"id"`
		State    string `json:"state" yaml:"state"`
		WorkerID string `json:"worker_id" yaml:"worker_id"`
		Trace    string `json:"trace,omitempty" yaml:"trace,omitempty"`
	} `json:"tasks" yaml:"tasks"`
}

// ConnectorDescription is `connect describe`'s: the config (secrets as
// Connect shows them) and the status.
type ConnectorDescription struct {
	Name   string            `json:"name" yaml:"name"`
	Type   string            `json:"type" yaml:"type"`
	Config map[string]string `json:"config" yaml:"config"`
	Status ConnectorStatus   `json:"status" yaml:"status"`
}

// NewConnectCommand returns `strand connect`.
func NewConnectCommand() *cobra.Command {
	o := new(connectOptions)
	cmd := &cobra.Command{
		Use:   "connect",
		Short: "Connectors: list, describe, create, pause, resume, restart, delete (Kafka Connect's REST API)",
		Long: "Connectors through Kafka Connect's REST API at --connect-url (every Strand agent serves it\n" +
			"on --connect-listen; so does a Connect cluster). For example:\n\n" +
			"    strand connect create -f pg-source.json\n" +
			"    strand connect list\n" +
			"    strand connect describe pg-source\n" +
			"    strand connect pause pg-source\n\n" +
			"A file for create is what POST /connectors takes, {\"name\": ..., \"config\": {...}}, or a bare\n" +
			"config map with a \"name\" key.\n" +
			"Authentication: --connect-user with the password in --connect-password-file or\n" +
			envName("connect-password") + ", or a bearer token in --connect-token-file or " + envName("connect-token") + ".",
		Args: cobra.NoArgs,
	}
	fs := cmd.PersistentFlags()
	fs.StringVar(&o.URL, "connect-url", envDefault("connect-url", DefaultConnectURL), "the Connect REST API's URL, http:// or https:// (env "+envName("connect-url")+")")
	fs.StringVar(&o.User, "connect-user", envDefault("connect-user", ""), "basic auth user (env "+envName("connect-user")+"); the password comes from --connect-password-file or "+envName("connect-password"))
	fs.StringVar(&o.PasswordFile, "connect-password-file", envDefault("connect-password-file", ""), "file holding the basic auth password (env "+envName("connect-password-file")+")")
	fs.StringVar(&o.TokenFile, "connect-token-file", envDefault("connect-token-file", ""), "file holding a bearer token (default: the token in "+envName("connect-token")+")")
	fs.StringVar(&o.TLS.CAFile, "tls-ca", envDefault("tls-ca", ""), "https: PEM CAs the API's certificate must chain to (env STRAND_TLS_CA)")
	fs.StringVar(&o.TLS.CertFile, "tls-cert", envDefault("tls-cert", ""), "https: PEM client certificate (env STRAND_TLS_CERT)")
	fs.StringVar(&o.TLS.KeyFile, "tls-key", envDefault("tls-key", ""), "https: PEM key of --tls-cert (env STRAND_TLS_KEY)")
	fs.DurationVar(&o.Timeout, "timeout", defaultTimeout, "bound on the command's requests (0: none)")
	cmd.AddCommand(newConnectListCmd(o), newConnectDescribeCmd(o), newConnectCreateCmd(o),
		newConnectActionCmd(o, "pause", "Pause a connector (its task stops; the position stays)", "PUT", "/pause"),
		newConnectActionCmd(o, "resume", "Resume a paused connector", "PUT", "/resume"),
		newConnectActionCmd(o, "restart", "Restart a connector and its task", "POST", "/restart"),
		newConnectActionCmd(o, "delete", "Delete a connector", "DELETE", ""))
	return cmd
}

func newConnectListCmd(o *connectOptions) *cobra.Command {
	var format *string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List connectors with their state",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := CheckOutputFormat(*format); err != nil {
				return err
			}
			cl, ctx, cancel, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer cancel()
			var m map[string]struct {
				Status ConnectorStatus `json:"status"`
			}
			if err := cl.do(ctx, "GET", "/connectors?expand=status", nil, &m); err != nil {
				return err
			}
			list := []ConnectorStatus{}
			for _, v := range m {
				list = append(list, v.Status)
			}
			slices.SortFunc(list, func(a, b ConnectorStatus) int { return strings.Compare(a.Name, b.Name) })
			return WriteOutput(cmd.OutOrStdout(), *format, list, func(w io.Writer) error {
				t := newTable(w, "NAME", "TYPE", "STATE", "TASK", "WORKER")
				for _, s := range list {
					task := ""
					if len(s.Tasks) > 0 {
						task = s.Tasks[0].State
					}
					t.row(s.Name, s.Type, s.Connector.State, task, s.Connector.WorkerID)
				}
				return t.flush()
			})
		},
	}
	format = addOutputFlag(cmd)
	return cmd
}

func newConnectDescribeCmd(o *connectOptions) *cobra.Command {
	var format *string
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a connector's config (secrets hidden) and status, with a failed task's trace",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := CheckOutputFormat(*format); err != nil {
				return err
			}
			cl, ctx, cancel, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer cancel()
			p := "/connectors/" + url.PathEscape(args[0])
			var d ConnectorDescription
			if err := cl.do(ctx, "GET", p, nil, &d); err != nil {
				return err
			}
			if err := cl.do(ctx, "GET", p+"/status", nil, &d.Status); err != nil {
				return err
			}
			return WriteOutput(cmd.OutOrStdout(), *format, d, func(w io.Writer) error {
				t := newTable(w)
				t.row("name", d.Name)
				t.row("type", d.Type)
				t.row("state", d.Status.Connector.State)
				t.row("worker", d.Status.Connector.WorkerID)
				for _, ts := range d.Status.Tasks {
					t.row(fmt.Sprintf("task %d", ts.ID), ts.State+" on "+ts.WorkerID)
				}
				keys := make([]string, 0, len(d.Config))
				for k := range d.Config {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				for _, k := range keys {
					t.row("config "+k, d.Config[k])
				}
				if err := t.flush(); err != nil {
					return err
				}
				for _, ts := range d.Status.Tasks {
					if ts.Trace != "" {
						if _, err := fmt.Fprintf(w, "\ntask %d trace:\n%s\n", ts.ID, ts.Trace); err != nil {
							return err
						}
					}
				}
				return nil
			})
		},
	}
	format = addOutputFlag(cmd)
	return cmd
}

func newConnectCreateCmd(o *connectOptions) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "create -f FILE",
		Short: "Create a connector from a JSON file ({\"name\", \"config\"}, or a config with \"name\"); - reads stdin",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return fmt.Errorf("%w: -f FILE is required", ErrUsage)
			}
			var b []byte
			var err error
			if file == "-" {
				b, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxConnectResponseBytes))
			} else {
				b, err = os.ReadFile(file)
			}
			if err != nil {
				return fmt.Errorf("%w: -f: %v", ErrUsage, err)
			}
			body, err := connectorBody(b)
			if err != nil {
				return fmt.Errorf("%w: %s: %v", ErrUsage, file, err)
			}
			cl, ctx, cancel, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer cancel()
			if err := cl.do(ctx, "POST", "/connectors", body, nil); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "created connector %s\n", body.Name)
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the connector's JSON")
	return cmd
}

// connectorCreate is POST /connectors' body.
type connectorCreate struct {
	Name   string         `json:"name"`
	Config map[string]any `json:"config"`
}

// connectorBody reads a file for create: Connect's {"name", "config"},
// or a bare config with a "name" key (what GET .../config prints).
func connectorBody(b []byte) (connectorCreate, error) {
	var c connectorCreate
	if err := json.Unmarshal(b, &c); err != nil {
		return c, err
	}
	if c.Config == nil {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return c, err
		}
		name, _ := m["name"].(string)
		c = connectorCreate{Name: name, Config: m}
	}
	if c.Name == "" {
		return c, errors.New("no connector name (a \"name\" key)")
	}
	return c, nil
}

func newConnectActionCmd(o *connectOptions, use, short, method, suffix string) *cobra.Command {
	return &cobra.Command{
		Use:   use + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, cancel, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer cancel()
			if err := cl.do(ctx, method, "/connectors/"+url.PathEscape(args[0])+suffix, nil, nil); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", use, args[0])
			return err
		},
	}
}
