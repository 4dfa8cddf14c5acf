// `cluster config get | set | delete | list`: broker configs (KIP-226's
// dynamic ones) through DescribeConfigs and IncrementalAlterConfigs on
// BROKER resources. The cluster-wide default (resource "") unless
// --node names one agent. Names are passed through as given: which
// configs exist and which may change at runtime is the agent's to say,
// and its errors (INVALID_CONFIG, INVALID_REQUEST) are shown as sent.

package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// ErrUnknownConfig reports a config name the resource described does
// not list.
var ErrUnknownConfig = errors.New("config not listed")

// brokerConfig is one config as list and get print it.
type brokerConfig struct {
	Name string `json:"name" yaml:"name"`
	// Value is nil for a sensitive config or one without a value.
	Value     *string `json:"value" yaml:"value"`
	Source    string  `json:"source" yaml:"source"`
	Sensitive bool    `json:"sensitive,omitempty" yaml:"sensitive,omitempty"`
}

// brokerResource says which BROKER resource --node selects.
type brokerResource struct {
	node int32 // -1: the cluster-wide default
}

func (r *brokerResource) register(cmd *cobra.Command) {
	cmd.Flags().Int32Var(&r.node, "node", -1, "one agent's node id (default: the cluster-wide default)")
}

// nodes is the kadm argument: none for the cluster-wide resource.
func (r *brokerResource) nodes() []int32 {
	if r.node < 0 {
		return nil
	}
	return []int32{r.node}
}

func (r *brokerResource) String() string {
	if r.node < 0 {
		return "cluster"
	}
	return "agent " + strconv.Itoa(int(r.node))
}

func newClusterConfigCmd(opts *ClientOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Get, set, delete and list broker configs, cluster-wide or of one agent (--node)",
		Long: "Broker configs, as kafka-configs --entity-type brokers handles them: without --node\n" +
			"the cluster-wide default (kafka-configs' --entity-default), with --node N one agent's\n" +
			"own value, which wins over the cluster-wide one. Only dynamic configs can be set; the\n" +
			"agent refuses the others with Kafka's error, which is shown as sent.",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(
		newClusterConfigListCmd(opts),
		newClusterConfigGetCmd(opts),
		newClusterConfigAlterCmd(opts, "set", "set KEY=VALUE...", "Set broker configs"),
		newClusterConfigAlterCmd(opts, "delete", "delete KEY...", "Delete broker configs, back to the next level's value"),
	)
	return cmd
}

// describeBrokerConfigs returns the configs of the resource r selects,
// sorted by name.
func describeBrokerConfigs(cmd *cobra.Command, opts *ClientOptions, r *brokerResource) ([]brokerConfig, error) {
	adm, ctx, done, err := opts.admin(cmd.Context())
	if err != nil {
		return nil, err
	}
	defer done()
	rcs, err := adm.DescribeBrokerConfigs(ctx, r.nodes()...)
	if err != nil {
		return nil, fmt.Errorf("describe %s configs: %w", r, err)
	}
	if len(rcs) != 1 {
		return nil, fmt.Errorf("describe %s configs: %d resources in the broker's response, want 1", r, len(rcs))
	}
	rc := rcs[0]
	if rc.Err != nil {
		return nil, fmt.Errorf("describe %s configs: %s", r, errText(rc.Err, rc.ErrMessage))
	}
	out := make([]brokerConfig, 0, len(rc.Configs))
	for _, c := range rc.Configs {
		out = append(out, brokerConfig{Name: c.Key, Value: c.Value, Source: c.Source.String(), Sensitive: c.Sensitive})
	}
	slices.SortFunc(out, func(a, b brokerConfig) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func printBrokerConfigs(w io.Writer, format string, cfgs []brokerConfig) error {
	return WriteOutput(w, format, cfgs, func(w io.Writer) error {
		t := newTable(w, "NAME", "VALUE", "SOURCE")
		for _, c := range cfgs {
			v := "-"
			switch {
			case c.Sensitive:
				v = "(sensitive)"
			case c.Value != nil:
				v = *c.Value
			}
			t.row(c.Name, v, c.Source)
		}
		return t.flush()
	})
}

func newClusterConfigListCmd(opts *ClientOptions) *cobra.Command {
	return newClusterConfigShowCmd(opts, "list", "List broker configs: the cluster-wide values set, or every config of --node with its source", cobra.NoArgs)
}

func newClusterConfigGetCmd(opts *ClientOptions) *cobra.Command {
	return newClusterConfigShowCmd(opts, "get KEY...", "Show some broker configs; fails if one is not listed (not set cluster-wide, or unknown)", cobra.MinimumNArgs(1))
}

// newClusterConfigShowCmd returns list (no arguments: every config) or
// get (the configs named).
func newClusterConfigShowCmd(opts *ClientOptions, use, short string, args cobra.PositionalArgs) *cobra.Command {
	var (
		r      brokerResource
		format *string
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, names []string) error {
			if err := CheckOutputFormat(*format); err != nil {
				return err
			}
			cfgs, err := describeBrokerConfigs(cmd, opts, &r)
			if err != nil {
				return err
			}
			if len(names) == 0 {
				return printBrokerConfigs(cmd.OutOrStdout(), *format, cfgs)
			}
			var got []brokerConfig
			var missing []string
			for _, name := range uniq(names) {
				i := slices.IndexFunc(cfgs, func(c brokerConfig) bool { return c.Name == name })
				if i < 0 {
					missing = append(missing, name)
					continue
				}
				got = append(got, cfgs[i])
			}
			if err := printBrokerConfigs(cmd.OutOrStdout(), *format, got); err != nil {
				return err
			}
			if len(missing) > 0 {
				hint := "no such broker config"
				if r.node < 0 {
					hint = "not set cluster-wide (--node N shows an agent's effective values)"
				}
				return fmt.Errorf("%w: %s: %s", ErrUnknownConfig, strings.Join(missing, ", "), hint)
			}
			return nil
		},
	}
	r.register(cmd)
	format = addOutputFlag(cmd)
	return cmd
}

// newClusterConfigAlterCmd returns set (op "set") or delete.
func newClusterConfigAlterCmd(opts *ClientOptions, op, use, short string) *cobra.Command {
	var (
		r      brokerResource
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: short + " (IncrementalAlterConfigs)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var sets, deletes []string
			if op == "set" {
				sets = args
			} else {
				deletes = args
			}
			alters, err := configAlters(sets, deletes)
			if err != nil {
				return err
			}
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			alter := adm.AlterBrokerConfigs
			if dryRun {
				alter = adm.ValidateAlterBrokerConfigs
			}
			resps, err := alter(ctx, alters, r.nodes()...)
			if err != nil {
				return fmt.Errorf("%s %s configs: %w", op, &r, err)
			}
			if len(resps) != 1 {
				return fmt.Errorf("%s %s configs: %d resources in the broker's response, want 1", op, &r, len(resps))
			}
			status := "OK"
			switch {
			case resps[0].Err != nil:
				status = errText(resps[0].Err, resps[0].ErrMessage)
			case dryRun:
				status = "OK (dry run: nothing changed)"
			}
			t := newTable(cmd.OutOrStdout(), "RESOURCE", "STATUS")
			t.row(r.String(), status)
			if err := t.flush(); err != nil {
				return err
			}
			if resps[0].Err != nil {
				return fmt.Errorf("%s %s configs: %w", op, &r, resps[0].Err)
			}
			return nil
		},
	}
	r.register(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only validate the change (ValidateOnly)")
	return cmd
}
