package cli

// Dynamic shell completion: topic and group names, asked of the cluster
// the command line points at (its --brokers, -X, environment and
// profile), bounded by completeTimeout and silent on any error, so a
// dead cluster costs a Tab press a moment and never prints anything.
// `strand completion bash|zsh|fish` is cobra's, on the root.

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// completeTimeout bounds one completion's requests: a shell waits on it.
const completeTimeout = 2 * time.Second

// completer lists the candidate names of one kind.
type completer func(ctx context.Context, adm *kadm.Client) ([]string, error)

func listTopicNames(ctx context.Context, adm *kadm.Client) ([]string, error) {
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	return topics.Names(), nil
}

func listGroupNames(ctx context.Context, adm *kadm.Client) ([]string, error) {
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	return groups.Groups(), nil
}

// clientOptionsOf finds the options a client command was built with,
// through its -X flag (which holds them).
func clientOptionsOf(cmd *cobra.Command) *ClientOptions {
	f := cmd.Flags().Lookup("option")
	if f == nil {
		f = cmd.InheritedFlags().Lookup("option")
	}
	if f == nil {
		return nil
	}
	if x, ok := f.Value.(*optionFlag); ok {
		return x.o
	}
	return nil
}

// complete returns the names list gives that start with prefix and are
// not in skip, sorted; nothing on any error.
func complete(cmd *cobra.Command, list completer, prefix string, skip []string) []string {
	o := clientOptionsOf(cmd)
	if o == nil {
		return nil
	}
	cl, err := o.NewClient()
	if err != nil {
		return nil
	}
	adm := kadm.NewClient(cl)
	defer adm.Close()
	timeout := completeTimeout
	if o.Timeout > 0 {
		timeout = min(timeout, o.Timeout)
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	names, err := list(ctx, adm)
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && !slices.Contains(skip, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// argsCompletion completes every positional argument with list's names
// (or only the first, for commands taking one name then nothing).
func argsCompletion(list completer, firstOnly bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if firstOnly && len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return complete(cmd, list, toComplete, args), cobra.ShellCompDirectiveNoFileComp
	}
}

func flagCompletion(list completer) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return complete(cmd, list, toComplete, nil), cobra.ShellCompDirectiveNoFileComp
	}
}

// addCompletions attaches the name completions to the commands of root
// that take topic or group names. It goes by command path, after the
// tree is built, so the commands' own files need not know about it.
func addCompletions(root *cobra.Command) {
	topics, groups := listTopicNames, listGroupNames
	args := []struct {
		path      string
		list      completer
		firstOnly bool
	}{
		{"topic describe", topics, false},
		{"topic delete", topics, false},
		{"topic alter-config", topics, false},
		{"topic add-partitions", topics, false},
		{"topic trim-prefix", topics, false},
		{"produce", topics, true},
		{"consume", topics, true},
		{"group describe", groups, false},
		{"group delete", groups, false},
		{"group reset-offsets", groups, true},
		{"group seek", groups, true},
		{"group offset-delete", groups, true},
		{"share-group seek", groups, true},
		{"share-group delete-offsets", groups, true},
		{"share-group delete", groups, false},
	}
	for _, a := range args {
		if cmd := findCommand(root, a.path); cmd != nil && cmd.ValidArgsFunction == nil {
			cmd.ValidArgsFunction = argsCompletion(a.list, a.firstOnly)
		}
	}
	flags := []struct {
		path, flag string
		list       completer
	}{
		{"group reset-offsets", "topic", topics},
		{"group seek", "topics", topics},
		{"group offset-delete", "topic", topics},
		{"share-group seek", "topic", topics},
		{"share-group delete-offsets", "topic", topics},
		{"consume", "group", groups},
	}
	for _, f := range flags {
		if cmd := findCommand(root, f.path); cmd != nil && cmd.Flags().Lookup(f.flag) != nil {
			// An error means a completion is already registered.
			_ = cmd.RegisterFlagCompletionFunc(f.flag, flagCompletion(f.list))
		}
	}
}

// findCommand returns the command at path (names separated by spaces)
// under root, or nil.
func findCommand(root *cobra.Command, path string) *cobra.Command {
	cmd := root
	for name := range strings.FieldsSeq(path) {
		i := slices.IndexFunc(cmd.Commands(), func(c *cobra.Command) bool { return c.Name() == name })
		if i < 0 {
			return nil
		}
		cmd = cmd.Commands()[i]
	}
	return cmd
}
