package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// RequireSubcommands makes every command group under root (a command
// with subcommands and no Run of its own) refuse an unknown subcommand
// with a usage error naming it, so the binary exits non-zero. Cobra
// itself does that only for the root: a group without a Run answers
// `strand topic bogus` with its help and no error. Called once the tree
// is complete; a group given no arguments still prints its help.
func RequireSubcommands(root *cobra.Command) {
	for _, sub := range root.Commands() {
		RequireSubcommands(sub)
	}
	if !root.HasSubCommands() || root.Runnable() || !root.HasParent() {
		return // the root's unknown commands are cobra's to refuse
	}
	root.Args = unknownSubcommand
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

// unknownSubcommand is a group's Args check: any argument left over is
// a subcommand cobra did not find.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, which it sets on the root alone
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return fmt.Errorf("%w: %s\nRun '%s --help' for usage.", ErrUsage, msg, cmd.CommandPath())
}
