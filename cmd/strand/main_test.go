package main

import (
	"bytes"
	"strings"
	"testing"
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
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			root := newRootCmd()
			var out bytes.Buffer
			root.SetOut(&out)
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
