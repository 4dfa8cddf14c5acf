package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestRootCommands(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"version"}, []string{"strand ", "go:"}},
		{[]string{"--help"}, []string{"topic", "produce", "consume", "version"}},
		{[]string{"topic", "--help"}, []string{"create", "list", "describe", "delete", "--brokers"}},
		{[]string{"consume", "--help"}, []string{"--from-beginning", "--group", "--exit-at-end", "--format"}},
		{[]string{"completion", "bash"}, []string{"__start_strand", "__complete"}},
		{[]string{"completion", "zsh"}, []string{"#compdef strand", "__complete"}},
		{[]string{"completion", "fish"}, []string{"complete -c strand", "__complete"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			root := newRootCmd()
			var out bytes.Buffer
			root.SetOut(&out)
			addCompletion(root)
			root.SetArgs(tt.args)
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestUnknownSubcommand: every command group refuses an unknown
// subcommand with an error naming it (main exits 1), and still prints
// its help, exiting 0, when given none. Cobra answers a group without a
// Run with its help and no error, whatever the arguments.
func TestUnknownSubcommand(t *testing.T) {
	var groups [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.HasSubCommands() {
			groups = append(groups, path)
		}
		for _, sub := range c.Commands() {
			walk(sub, append(slices.Clone(path), sub.Name()))
		}
	}
	walk(addCompletion(newRootCmd()), nil)
	for _, want := range [][]string{nil, {"topic"}, {"group"}, {"cluster", "config"}, {"completion"}, {"profile"}} {
		if !slices.ContainsFunc(groups, func(g []string) bool { return slices.Equal(g, want) }) {
			t.Fatalf("command groups %v lack %v", groups, want)
		}
	}
	t.Run("suggestion", func(t *testing.T) {
		root := newRootCmd()
		root.SetArgs([]string{"group", "lst"})
		if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "did you mean list?") {
			t.Fatalf("err = %v, want a suggestion of list", err)
		}
	})
	for _, g := range groups {
		t.Run(strings.Join(append([]string{"strand"}, g...), " "), func(t *testing.T) {
			root := newRootCmd()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			addCompletion(root)
			root.SetArgs(append(slices.Clone(g), "bogus"))
			err := root.Execute()
			if err == nil || !strings.Contains(err.Error(), `unknown command "bogus"`) {
				t.Fatalf("err = %v, want an unknown command error naming bogus; output:\n%s", err, out.String())
			}

			root = newRootCmd()
			out.Reset()
			root.SetOut(&out)
			addCompletion(root)
			root.SetArgs(g)
			if err := root.Execute(); err != nil {
				t.Fatalf("with no subcommand: %v", err)
			}
			if !strings.Contains(out.String(), "Available Commands:") {
				t.Fatalf("with no subcommand, the help is not printed:\n%s", out.String())
			}
		})
	}
}
