// Command strand is the one Strand binary: the agent (serve) and the tools
// that talk to it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/strandkafka/strand/internal/bench"
	"github.com/strandkafka/strand/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal cancels ctx, restore the default
		// handling so a second Ctrl-C kills a command stuck in cleanup.
		<-ctx.Done()
		stop()
	}()
	if err := addCompletion(newRootCmd()).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "strand:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	info := currentBuildInfo()
	root := &cobra.Command{
		Use:           "strand",
		Short:         "Strand: a Kafka-compatible streaming platform on object storage and a shared log",
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints what `strand version` does.
		Version: info.Version,
	}
	root.SetVersionTemplate(info.String())
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build time and Go version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			fmt.Fprint(cmd.OutOrStdout(), info)
		},
	})
	root.AddCommand(newHealthcheckCmd())

	// --- The agent ---------------------------------------------------
	// `strand serve` (internal/agent)
	root.AddCommand(newServeCmd())
	// `strand config print`: what serve would run with (config.go)
	root.AddCommand(newConfigCmd())

	// --- Client tools: topic, produce, consume (internal/cli) ---------
	cli.AddCommands(root)

	// `strand bench` (internal/bench)
	root.AddCommand(bench.NewCommand())
	// The hidden server the bench re-executes this binary as, so it
	// measures the CPU of the server alone.
	root.AddCommand(bench.NewServerCommand())

	// Last, so it covers every command above: an error for an unknown
	// subcommand of any group.
	cli.RequireSubcommands(root)
	return root
}

// addCompletion adds cobra's `completion` command (cobra would add it
// at Execute, past RequireSubcommands' reach) and holds it to the same
// rule. It writes to root's output as set when this is called.
func addCompletion(root *cobra.Command) *cobra.Command {
	root.InitDefaultCompletionCmd()
	cli.RequireSubcommands(root)
	return root
}
