// `group list`: the groups of every broker, with their state, protocol
// type and group type (classic, consumer, share), filtered by --state.

package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// canonicalStates maps --state values to the brokers' spelling.
func canonicalStates(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, s := range in {
		i := slices.IndexFunc(groupStates, func(g string) bool { return strings.EqualFold(g, strings.TrimSpace(s)) })
		if i < 0 {
			return nil, fmt.Errorf("%w: --state %q: want one of %s", ErrUsage, s, strings.Join(groupStates, ", "))
		}
		if !slices.Contains(out, groupStates[i]) {
			out = append(out, groupStates[i])
		}
	}
	return out, nil
}

// GroupListing is one group of `group list --format json|yaml`.
type GroupListing struct {
	Group        string `json:"group" yaml:"group"`
	Coordinator  int32  `json:"coordinator" yaml:"coordinator"`
	State        string `json:"state" yaml:"state"`
	ProtocolType string `json:"protocol_type" yaml:"protocol_type"`
	// GroupType is classic, consumer (KIP-848) or share (KIP-932); empty
	// from brokers older than ListGroups v5.
	GroupType string `json:"group_type" yaml:"group_type"`
}

func newGroupListCmd(opts *ClientOptions) *cobra.Command {
	var states []string
	var format *string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List groups with their state, protocol type and type (classic, consumer, share)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			filter, err := canonicalStates(states)
			if err != nil {
				return err
			}
			adm, ctx, done, err := opts.adminWithFormat(cmd.Context(), *format)
			if err != nil {
				return err
			}
			defer done()
			// Brokers filter by state (ListGroups v4+); a partial answer
			// (one broker failed) is still printed before the error.
			listed, listErr := adm.ListGroups(ctx, filter...)
			listing := []GroupListing{}
			for _, g := range listed.Sorted() {
				listing = append(listing, GroupListing{Group: g.Group, Coordinator: g.Coordinator, State: g.State, ProtocolType: g.ProtocolType, GroupType: g.GroupType})
			}
			if err := WriteOutput(cmd.OutOrStdout(), *format, listing, func(w io.Writer) error {
				t := newTable(w, "GROUP", "STATE", "PROTOCOL-TYPE", "TYPE")
				for _, g := range listing {
					t.row(g.Group, dash(g.State), dash(g.ProtocolType), dash(g.GroupType))
				}
				return t.flush()
			}); err != nil {
				return err
			}
			if listErr != nil {
				return fmt.Errorf("list groups: %w", listErr)
			}
			return nil
		},
	}
	format = addOutputFlag(cmd)
	cmd.Flags().StringSliceVar(&states, "state", nil, "only groups in these states, comma-separated or repeated ("+strings.Join(groupStates, ", ")+")")
	return cmd
}
