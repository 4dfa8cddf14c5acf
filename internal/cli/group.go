// The `group` command: the parent command, with what its subcommands
// share (sentinel errors, group states, cell helpers). Each subcommand
// has its own file: group_list.go, group_describe.go, group_delete.go,
// group_reset.go, group_offsets.go (seek, offset-delete).

package cli

import (
	"errors"
	"slices"

	"github.com/spf13/cobra"
)

// Sentinel errors of the group commands.
var (
	// ErrUnknownGroup reports a group the cluster does not have.
	ErrUnknownGroup = errors.New("unknown group")
	// ErrGroupActive reports a group that still has members, so its
	// offsets cannot be reset: the members would overwrite them with
	// their next commit.
	ErrGroupActive = errors.New("group has active members")
	// ErrNoCommit reports that a reset needs a committed offset the group
	// does not have (--shift-by from nothing, --all-topics of a group that
	// never committed).
	ErrNoCommit = errors.New("no committed offset")
)

// Group states as brokers name them: the classic protocol's, then those
// KIP-848 groups add. --state matches them case-insensitively.
var groupStates = []string{
	"Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Dead",
	"Assigning", "Reconciling", "NotReady",
}

const (
	stateEmpty = "Empty"
	stateDead  = "Dead" // what brokers call a group they do not have
)

// NewGroupCommand returns `group` with its list, describe, delete,
// reset-offsets, seek and offset-delete subcommands.
func NewGroupCommand() *cobra.Command {
	var opts ClientOptions
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe (with lag), delete consumer groups; reset, seek and delete their offsets",
		Args:  cobra.NoArgs,
	}
	opts.Register(cmd.PersistentFlags())
	cmd.AddCommand(
		newGroupListCmd(&opts),
		newGroupDescribeCmd(&opts),
		newGroupDeleteCmd(&opts),
		newGroupResetCmd(&opts),
		newGroupSeekCmd(&opts),
		newGroupOffsetDeleteCmd(&opts),
	)
	return cmd
}

// dash renders an absent value as a visible cell, so columns stay
// whitespace-separable for scripts.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// uniq drops repeated arguments, keeping the first occurrence's order.
func uniq(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
