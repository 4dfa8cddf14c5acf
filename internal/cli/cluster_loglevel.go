// `cluster log-level get [LOGGER] | set LOGGER LEVEL`: the agents'
// dynamic loggers (KIP-412's BROKER_LOGGER resource: DescribeConfigs
// and IncrementalAlterConfigs naming the agent's node id), as
// kafka-configs --entity-type broker-loggers reads and changes them.
// Every agent unless --node names one: each agent's levels are its own
// and, as in Kafka, last until it restarts. Each request goes to the
// agent it names, which refuses a resource that is not its own id.

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrUnknownLogger reports a logger no agent asked lists.
var ErrUnknownLogger = errors.New("no such logger")

// agentLogger is one logger of one agent, as get prints it.
type agentLogger struct {
	Agent  int32  `json:"agent" yaml:"agent"`
	Logger string `json:"logger" yaml:"logger"`
	Level  string `json:"level" yaml:"level"`
	// Error is set, by set, when the agent refused the change.
	Error string `json:"error,omitempty" yaml:"error,omitempty"`
}

func newClusterLogLevelCmd(opts *ClientOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "log-level",
		Short: "Show and set the agents' log levels (the dynamic loggers: root, one per component, kafka.authorizer.logger)",
		Long: "The agents' loggers, Kafka's broker loggers (KIP-412): root, one per component and\n" +
			"kafka.authorizer.logger, the authorization log. A level set lasts until the agent\n" +
			"restarts, as in Kafka. Levels: TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF.\n" +
			"Every agent unless --node names one.",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newClusterLogLevelGetCmd(opts), newClusterLogLevelSetCmd(opts))
	return cmd
}

// logLevelAgents returns the node ids to ask: node, or every agent
// Metadata lists.
func logLevelAgents(ctx context.Context, adm *kadm.Client, node int32) ([]int32, error) {
	if node >= 0 {
		return []int32{node}, nil
	}
	m, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the agents: %w", err)
	}
	ids := m.Brokers.NodeIDs()
	slices.Sort(ids)
	return ids, nil
}

// describeLoggers asks agent id for its loggers.
func describeLoggers(ctx context.Context, cl *kgo.Client, id int32) ([]agentLogger, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, strconv.Itoa(int(id))
	req.Resources = append(req.Resources, rr)
	kr, err := cl.Broker(int(id)).Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("agent %d: %w", id, err)
	}
	resp := kr.(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 {
		return nil, fmt.Errorf("agent %d: %d resources in its answer, want 1", id, len(resp.Resources))
	}
	res := resp.Resources[0]
	if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
		return nil, fmt.Errorf("agent %d: %s", id, errText(err, strOr(res.ErrorMessage)))
	}
	out := make([]agentLogger, 0, len(res.Configs))
	for _, c := range res.Configs {
		lg := agentLogger{Agent: id, Logger: c.Name, Level: "-"}
		if c.Value != nil {
			lg.Level = *c.Value
		}
		out = append(out, lg)
	}
	// root first, as Kafka lists it, then by name.
	slices.SortFunc(out, func(a, b agentLogger) int {
		if (a.Logger == "root") != (b.Logger == "root") {
			if a.Logger == "root" {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Logger, b.Logger)
	})
	return out, nil
}

func printLoggers(w io.Writer, format string, lgs []agentLogger, withStatus bool) error {
	return WriteOutput(w, format, lgs, func(w io.Writer) error {
		cols := []string{"AGENT", "LOGGER", "LEVEL"}
		if withStatus {
			cols = append(cols, "STATUS")
		}
		t := newTable(w, cols...)
		for _, lg := range lgs {
			row := []any{lg.Agent, lg.Logger, lg.Level}
			if withStatus {
				status := "OK"
				if lg.Error != "" {
					status = lg.Error
				}
				row = append(row, status)
			}
			t.row(row...)
		}
		return t.flush()
	})
}

func newClusterLogLevelGetCmd(opts *ClientOptions) *cobra.Command {
	var (
		node   int32
		format *string
	)
	cmd := &cobra.Command{
		Use:   "get [LOGGER]",
		Short: "Show every logger's level, or LOGGER's, on every agent or on --node (DescribeConfigs BROKER_LOGGER)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := CheckOutputFormat(*format); err != nil {
				return err
			}
			adm, cl, ctx, done, err := opts.aclClients(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			ids, err := logLevelAgents(ctx, adm, node)
			if err != nil {
				return err
			}
			var all []agentLogger
			for _, id := range ids {
				lgs, err := describeLoggers(ctx, cl, id)
				if err != nil {
					return err
				}
				if len(args) == 1 {
					i := slices.IndexFunc(lgs, func(lg agentLogger) bool { return lg.Logger == args[0] })
					if i < 0 {
						return fmt.Errorf("%w %q on agent %d: `strand cluster log-level get` lists the loggers", ErrUnknownLogger, args[0], id)
					}
					lgs = lgs[i : i+1]
				}
				all = append(all, lgs...)
			}
			return printLoggers(cmd.OutOrStdout(), *format, all, false)
		},
	}
	cmd.Flags().Int32Var(&node, "node", -1, "one agent's node id (default: every agent)")
	format = addOutputFlag(cmd)
	return cmd
}

func newClusterLogLevelSetCmd(opts *ClientOptions) *cobra.Command {
	var (
		node   int32
		format *string
	)
	cmd := &cobra.Command{
		Use:   "set LOGGER LEVEL",
		Short: "Set LOGGER's level on every agent or on --node, until the agent restarts (IncrementalAlterConfigs BROKER_LOGGER)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := CheckOutputFormat(*format); err != nil {
				return err
			}
			logger, level := args[0], strings.ToUpper(args[1])
			adm, cl, ctx, done, err := opts.aclClients(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			ids, err := logLevelAgents(ctx, adm, node)
			if err != nil {
				return err
			}
			var out []agentLogger
			var failed []string
			for _, id := range ids {
				lg := agentLogger{Agent: id, Logger: logger, Level: level}
				if err := setLoggerLevel(ctx, cl, id, logger, level); err != nil {
					lg.Error = err.Error()
					failed = append(failed, strconv.Itoa(int(id)))
				}
				out = append(out, lg)
			}
			if err := printLoggers(cmd.OutOrStdout(), *format, out, true); err != nil {
				return err
			}
			if len(failed) > 0 {
				return fmt.Errorf("setting %s to %s failed on agent %s", logger, level, strings.Join(failed, ", "))
			}
			return nil
		},
	}
	cmd.Flags().Int32Var(&node, "node", -1, "one agent's node id (default: every agent)")
	format = addOutputFlag(cmd)
	return cmd
}

// setLoggerLevel sets logger to level on agent id: nil, or the agent's
// refusal in its words.
func setLoggerLevel(ctx context.Context, cl *kgo.Client, id int32, logger, level string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, strconv.Itoa(int(id))
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = logger, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(level)
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	kr, err := cl.Broker(int(id)).Request(ctx, req)
	if err != nil {
		return err
	}
	resp := kr.(*kmsg.IncrementalAlterConfigsResponse)
	if len(resp.Resources) != 1 {
		return fmt.Errorf("%d resources in the answer, want 1", len(resp.Resources))
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		return errors.New(errText(err, strOr(resp.Resources[0].ErrorMessage)))
	}
	return nil
}
