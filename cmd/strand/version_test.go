package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

func TestReadBuildInfo(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/strandkafka/strand", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	tests := []struct {
		name                        string
		bi                          *debug.BuildInfo
		ok                          bool
		ldVersion, ldCommit, ldTime string
		want                        []string
		not                         []string
	}{
		{
			name: "from the build info",
			bi:   stamped, ok: true,
			want: []string{"strand v0.3.0\n", "commit:      0123456789abcdef0123456789abcdef01234567+dirty", "commit time: 2026-12-01T10:00:00Z", "go:          go1.26.8 "},
			not:  []string{"build time"},
		},
		{
			name: "ldflags win",
			bi:   stamped, ok: true,
			ldVersion: "v1.0.0", ldCommit: "feedface", ldTime: "2026-12-02T08:00:00Z",
			want: []string{"strand v1.0.0\n", "commit:      feedface\n", "build time:  2026-12-02T08:00:00Z"},
			not:  []string{"dirty", "commit time", "v0.3.0"},
		},
		{
			name: "a go run build",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, ok: true,
			want: []string{"strand dev\n", "go:          go1.26.8", "commit:      unknown: built without VCS stamping"},
			not:  []string{"commit time", "(devel)"},
		},
		{name: "no build info", want: []string{"strand dev\n", "go:          go", "commit:      unknown: built without VCS stamping"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func(v, c, b string) { version, commit, buildTime = v, c, b }(version, commit, buildTime)
			version, commit, buildTime = tt.ldVersion, tt.ldCommit, tt.ldTime
			out := readBuildInfo(tt.bi, tt.ok).String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(out, n) {
					t.Errorf("output has %q:\n%s", n, out)
				}
			}
		})
	}
}

// TestVersionCommands checks `strand version` and `strand --version` print
// the same report, the running test binary's.
func TestVersionCommands(t *testing.T) {
	want := currentBuildInfo().String()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if out.String() != want {
			t.Errorf("%v printed\n%s\nwant\n%s", args, out.String(), want)
		}
		if !strings.HasPrefix(out.String(), "strand ") || !strings.Contains(out.String(), "go:") {
			t.Errorf("%v printed %q", args, out.String())
		}
	}
}
