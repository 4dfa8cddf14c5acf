package cli

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/meta"
)

// TestFeatures runs `strand features` against an agent of a new cluster
// (at this build's highest levels): describe, a refused upgrade with the
// agent's reason, a dry run that changes nothing, and a downgrade.
func TestFeatures(t *testing.T) {
	a, _ := startAgentOn(t, t.TempDir())
	brokers := a.KafkaAddr()
	features := func(args ...string) result {
		t.Helper()
		return runAdmin(t, "features", append(args, "--brokers", brokers)...)
	}
	describe := func() string {
		t.Helper()
		r := features("describe")
		if r.err != nil {
			t.Fatalf("features describe: %v\n%s", r.err, r.stderr)
		}
		return r.stdout
	}
	maxLevel := strconv.Itoa(int(meta.MaxMetadataLevel))
	beyond := strconv.Itoa(int(meta.MaxMetadataLevel) + 1)
	if got, want := rows(describe()), [][]string{
		{"FEATURE", "SUPPORTED-MIN", "SUPPORTED-MAX", "FINALIZED", "EPOCH"},
		{"group.version", "0", "1", "1", "1"},
		{"strand.metadata.version", "1", maxLevel, maxLevel, "1"},
		{"transaction.version", "0", "2", "2", "1"},
	}; !equalRows(got, want) {
		t.Fatalf("describe:\n%v\nwant\n%v", got, want)
	}

	r := features("describe", "--format", "json")
	var desc FeaturesDescription
	if err := json.Unmarshal([]byte(r.stdout), &desc); r.err != nil || err != nil {
		t.Fatalf("describe --format json: %v %v\n%s", r.err, err, r.stdout)
	}
	if i := slices.IndexFunc(desc.Features, func(f FeatureDescription) bool { return f.Name == "strand.metadata.version" }); i < 0 ||
		desc.FinalizedEpoch != 1 || desc.Features[i].SupportedMax == nil || *desc.Features[i].SupportedMax != meta.MaxMetadataLevel ||
		desc.Features[i].Finalized != meta.MaxMetadataLevel {
		t.Fatalf("describe --format json: %s", r.stdout)
	}

	r = features("upgrade", "--feature", "strand.metadata.version="+beyond)
	if !errors.Is(r.err, ErrPartialFailure) || !strings.Contains(r.stdout,
		"Could not upgrade strand.metadata.version to "+beyond+". INVALID_UPDATE_VERSION") || !strings.Contains(r.stdout, "only supports versions 1-"+maxLevel) {
		t.Fatalf("upgrade to %s: %v\n%s", beyond, r.err, r.stdout)
	}
	r = features("downgrade", "--feature", "transaction.version=1", "--dry-run")
	if r.err != nil || r.stdout != "DRY RUN: no change was made.\ntransaction.version can be downgraded to 1.\n" {
		t.Fatalf("dry run: %v\n%q", r.err, r.stdout)
	}
	r = features("downgrade", "--feature", "transaction.version=1", "--feature", "group.version=0")
	if r.err != nil || r.stdout != "transaction.version was downgraded to 1.\ngroup.version was downgraded to 0.\n" {
		t.Fatalf("downgrade: %v\n%q", r.err, r.stdout)
	}
	out := describe()
	if !strings.Contains(out, "group.version") || rows(out)[1][3] != "0" || rows(out)[3][3] != "1" {
		t.Fatalf("describe after the downgrade:\n%s", out)
	}
	for _, args := range [][]string{{"upgrade"}, {"upgrade", "--feature", "x"}, {"upgrade", "--feature", "x=-1"},
		{"upgrade", "--feature", "x=1", "--feature", "x=2"}} {
		if r := features(args...); !errors.Is(r.err, ErrUsage) {
			t.Errorf("features %v: %v, want a usage error", args, r.err)
		}
	}
}
