package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Release builds may stamp these with
// -ldflags "-X main.version=... -X main.commit=... -X main.buildTime=...";
// an empty value means "read it from the build info". The Dockerfile does
// so because its build context has no .git for Go to read the commit from.
var (
	version   string
	commit    string
	buildTime string
)

// unknownCommit is the commit line of a binary that knows none.
const unknownCommit = "unknown: built without VCS stamping; build in a git checkout, " +
	`or with -ldflags "-X main.commit=$(git rev-parse HEAD)", to stamp it ` +
	"(docs/operations.md, Building a release binary)"

// buildInfo is what `strand version` reports.
type buildInfo struct {
	Version    string // module version, or the -ldflags one
	Commit     string // VCS revision, "" when unknown
	Dirty      bool   // built from a tree with uncommitted changes
	CommitTime string // time of the commit (RFC 3339), from the VCS
	BuildTime  string // time of the build; only -ldflags can know it
	GoVersion  string
	Platform   string
}

// readBuildInfo merges the -ldflags values (which win) with what the Go
// toolchain stamped into the binary: the main module's version (a tag, or
// a pseudo-version from the commit since Go 1.24) and the vcs.* settings.
func readBuildInfo(bi *debug.BuildInfo, ok bool) buildInfo {
	info := buildInfo{GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if ok {
		info.GoVersion = bi.GoVersion
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Commit = s.Value
			case "vcs.time":
				info.CommitTime = s.Value
			case "vcs.modified":
				info.Dirty = s.Value == "true"
			}
		}
	}
	if version != "" {
		info.Version = version
	}
	if commit != "" {
		// A stamped commit says nothing of the tree's state.
		info.Commit, info.Dirty, info.CommitTime = commit, false, ""
	}
	info.BuildTime = buildTime
	if info.Version == "" {
		info.Version = "dev"
	}
	return info
}

// currentBuildInfo is the running binary's buildInfo.
func currentBuildInfo() buildInfo { return readBuildInfo(debug.ReadBuildInfo()) }

// String is `strand version`'s output: "strand VERSION" first, as
// scripts that cut the second word expect, then one "key: value" line
// per known fact.
func (b buildInfo) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "strand %s\n", b.Version)
	if b.Commit != "" {
		c := b.Commit
		if b.Dirty {
			c += "+dirty"
		}
		fmt.Fprintf(&s, "  commit:      %s\n", c)
	} else {
		// Say where the commit went rather than leave it out: a binary
		// from a source tarball, -buildvcs=false or a build context
		// without .git looks otherwise like one built from nothing.
		fmt.Fprintf(&s, "  commit:      %s\n", unknownCommit)
	}
	if b.CommitTime != "" {
		fmt.Fprintf(&s, "  commit time: %s\n", b.CommitTime)
	}
	if b.BuildTime != "" {
		fmt.Fprintf(&s, "  build time:  %s\n", b.BuildTime)
	}
	fmt.Fprintf(&s, "  go:          %s %s\n", b.GoVersion, b.Platform)
	return s.String()
}
