// The `features` command: KIP-584 feature levels, in the manner of
// Kafka's kafka-features tool. `describe` reads ApiVersions from every
// broker (as Kafka's Admin.describeFeatures reads it from one, through
// kadm, which has no helper of its own for it); `upgrade` and
// `downgrade` send UpdateFeatures. Against Strand, raising
// strand.metadata.version after every agent runs a new build is what
// lets that build's new command versions into the shared log.

package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// UpdateFeatures upgrade types (Kafka's FeatureUpdate.UpgradeType).
const (
	upgradeTypeUpgrade         = 1
	upgradeTypeSafeDowngrade   = 2
	upgradeTypeUnsafeDowngrade = 3
)

// NewFeaturesCommand returns `strand features`.
func NewFeaturesCommand() *cobra.Command {
	opts := new(ClientOptions)
	cmd := &cobra.Command{
		Use:   "features",
		Short: "Describe and change finalized feature levels (KIP-584)",
		Long: "Describe and change the cluster's finalized feature levels (KIP-584).\n\n" +
			"strand.metadata.version says which command versions agents write to the shared log.\n" +
			"A rolling upgrade replaces every agent with the new build first (older agents keep\n" +
			"running meanwhile), then raises it:\n\n" +
			"    strand features upgrade --feature strand.metadata.version=2\n\n" +
			"The agents refuse a level one of them does not support (INVALID_UPDATE_VERSION).\n" +
			"transaction.version and group.version are Kafka's, changed the same way.",
	}
	opts.Register(cmd.PersistentFlags())
	cmd.AddCommand(newFeaturesDescribeCmd(opts),
		newFeaturesUpdateCmd(opts, "upgrade", "Raise feature levels", upgradeTypeUpgrade),
		newFeaturesUpdateCmd(opts, "downgrade", "Lower feature levels (--unsafe for a lossy downgrade)", upgradeTypeSafeDowngrade))
	return cmd
}

// FeaturesDescription is `features describe --format json|yaml`.
type FeaturesDescription struct {
	// FinalizedEpoch is the finalized features epoch of the newest answer.
	FinalizedEpoch int64                `json:"finalized_epoch" yaml:"finalized_epoch"`
	Features       []FeatureDescription `json:"features" yaml:"features"`
}

// FeatureDescription is one feature: the range every broker supports
// (null where one does not support it at all) and the finalized level
// (0: none).
type FeatureDescription struct {
	Name         string `json:"name" yaml:"name"`
	SupportedMin *int16 `json:"supported_min" yaml:"supported_min"`
	SupportedMax *int16 `json:"supported_max" yaml:"supported_max"`
	Finalized    int16  `json:"finalized" yaml:"finalized"`
}

func newFeaturesDescribeCmd(opts *ClientOptions) *cobra.Command {
	var format *string
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "List each feature's supported range and finalized level",
		Long: "List each feature with the range every broker supports (\"-\" where one does not\n" +
			"support it at all), which bounds what can be finalized, and the level the cluster\n" +
			"finalized (0: none), with the finalized features epoch. A Strand agent of a build\n" +
			"before feature levels names no strand.metadata.version: it supports level 1.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, ctx, done, err := opts.adminWithFormat(cmd.Context(), *format)
			if err != nil {
				return err
			}
			defer done()
			vs, err := adm.ApiVersions(ctx)
			if err != nil {
				return fmt.Errorf("api versions: %w", err)
			}
			var answers []*kmsg.ApiVersionsResponse
			var errs []error
			for _, v := range vs.Sorted() {
				switch raw := v.Raw(); {
				case v.Err != nil || raw == nil:
					errs = append(errs, fmt.Errorf("broker %d: %w", v.NodeID, v.Err))
				case raw.Version < 3:
					errs = append(errs, fmt.Errorf("broker %d answered ApiVersions v%d, which carries no features", v.NodeID, raw.Version))
				default:
					answers = append(answers, raw)
				}
			}
			if len(answers) == 0 {
				return fmt.Errorf("no broker answered ApiVersions with features: %w", errors.Join(errs...))
			}
			if err := printFeatures(cmd.OutOrStdout(), *format, answers); err != nil {
				return err
			}
			if len(errs) > 0 {
				return fmt.Errorf("%w: %w", ErrPartialFailure, errors.Join(errs...))
			}
			return nil
		},
	}
	format = addOutputFlag(cmd)
	return cmd
}

// printFeatures prints, per feature, the range every answer supports and
// the finalized level of the answer with the highest epoch (KIP-584:
// the newest).
func printFeatures(w io.Writer, format string, answers []*kmsg.ApiVersionsResponse) error {
	spans := map[string]*featureSpan{}
	strand := false // some agent names strand.metadata.version
	for _, a := range answers {
		for _, f := range a.SupportedFeatures {
			addSpan(spans, f.Name, f.MinVersion, f.MaxVersion)
			strand = strand || f.Name == featureStrandMetadata
		}
	}
	finalized := map[string]int16{}
	if strand {
		// The others are Strand builds before feature levels: they
		// write level 1, which a log without a level is at.
		for _, a := range answers {
			if !slices.ContainsFunc(a.SupportedFeatures, func(f kmsg.ApiVersionsResponseSupportedFeature) bool { return f.Name == featureStrandMetadata }) {
				addSpan(spans, featureStrandMetadata, 1, 1)
			}
		}
		finalized[featureStrandMetadata] = 1
	}
	// The newest answer; of equal epochs, the one that knows the most.
	newest := answers[0]
	for _, a := range answers[1:] {
		if a.FinalizedFeaturesEpoch > newest.FinalizedFeaturesEpoch ||
			a.FinalizedFeaturesEpoch == newest.FinalizedFeaturesEpoch && len(a.FinalizedFeatures) > len(newest.FinalizedFeatures) {
			newest = a
		}
	}
	for _, f := range newest.FinalizedFeatures {
		finalized[f.Name] = f.MaxVersionLevel
		if spans[f.Name] == nil {
			spans[f.Name] = &featureSpan{}
		}
	}
	names := make([]string, 0, len(spans))
	for n := range spans {
		names = append(names, n)
	}
	slices.Sort(names)
	desc := FeaturesDescription{FinalizedEpoch: newest.FinalizedFeaturesEpoch, Features: []FeatureDescription{}}
	for _, n := range names {
		f := FeatureDescription{Name: n, Finalized: finalized[n]}
		if sp := spans[n]; sp.n == len(answers) && sp.min <= sp.max {
			f.SupportedMin, f.SupportedMax = &sp.min, &sp.max
		}
		desc.Features = append(desc.Features, f)
	}
	return WriteOutput(w, format, desc, func(w io.Writer) error {
		t := newTable(w, "FEATURE", "SUPPORTED-MIN", "SUPPORTED-MAX", "FINALIZED", "EPOCH")
		for _, f := range desc.Features {
			lo, hi := "-", "-"
			if f.SupportedMin != nil {
				lo, hi = strconv.Itoa(int(*f.SupportedMin)), strconv.Itoa(int(*f.SupportedMax))
			}
			t.row(f.Name, lo, hi, f.Finalized, desc.FinalizedEpoch)
		}
		return t.flush()
	})
}

// featureStrandMetadata is Strand's own feature (meta.FeatureMetadata;
// the CLI speaks only the Kafka protocol).
const featureStrandMetadata = "strand.metadata.version"

// featureSpan is the range every answer counted in n supports.
type featureSpan struct {
	min, max int16
	n        int
}

func addSpan(spans map[string]*featureSpan, name string, lo, hi int16) {
	sp := spans[name]
	if sp == nil {
		spans[name] = &featureSpan{min: lo, max: hi, n: 1}
		return
	}
	sp.min, sp.max, sp.n = max(sp.min, lo), min(sp.max, hi), sp.n+1
}

func newFeaturesUpdateCmd(opts *ClientOptions, verb, short string, upgradeType int8) *cobra.Command {
	var (
		features []string
		dryRun   bool
		unsafe   bool
	)
	cmd := &cobra.Command{
		Use:   verb + " --feature NAME=LEVEL...",
		Short: short,
		Long: short + ". All features change together or none does: the first one refused fails\n" +
			"the request. --dry-run asks the broker to validate without changing anything.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(features) == 0 {
				return fmt.Errorf("%w: name at least one --feature NAME=LEVEL", ErrUsage)
			}
			typ := upgradeType
			if unsafe {
				typ = upgradeTypeUnsafeDowngrade
			}
			req := kmsg.NewPtrUpdateFeaturesRequest()
			req.ValidateOnly = dryRun
			var names []string
			levels := map[string]int16{}
			for _, kv := range features {
				name, v, err := splitKeyValue("--feature", kv)
				if err != nil {
					return err
				}
				level, err := strconv.ParseInt(v, 10, 16)
				if err != nil || level < 0 {
					return fmt.Errorf("%w: --feature %s: level %q is not a number from 0", ErrUsage, name, v)
				}
				if _, dup := levels[name]; dup {
					return fmt.Errorf("%w: --feature %s given twice", ErrUsage, name)
				}
				levels[name] = int16(level)
				names = append(names, name)
				u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
				u.Feature, u.MaxVersionLevel, u.UpgradeType = name, int16(level), typ
				u.AllowDowngrade = typ != upgradeTypeUpgrade // v0 brokers read this instead
				req.FeatureUpdates = append(req.FeatureUpdates, u)
			}
			cl, err := opts.NewClient()
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := opts.requestContext(cmd.Context())
			defer cancel()
			req.TimeoutMillis = int32(opts.Timeout.Milliseconds())
			// kmsg rather than kadm.UpdateFeatures, which keeps the
			// error codes but drops the broker's messages, and those
			// say which agent refused what.
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return fmt.Errorf("update features: %w", err)
			}
			return printFeatureUpdates(cmd, verb, dryRun, names, levels, resp)
		},
	}
	cmd.Flags().StringArrayVar(&features, "feature", nil, "feature and level to set, as NAME=LEVEL (repeatable)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "validate only; change nothing")
	if upgradeType != upgradeTypeUpgrade {
		cmd.Flags().BoolVar(&unsafe, "unsafe", false, "allow a lossy downgrade (UNSAFE_DOWNGRADE)")
	}
	return cmd
}

// printFeatureUpdates prints one line per feature, as Kafka's tool does,
// and fails if any feature failed.
func printFeatureUpdates(cmd *cobra.Command, verb string, dryRun bool, names []string, levels map[string]int16, resp *kmsg.UpdateFeaturesResponse) error {
	out := cmd.OutOrStdout()
	if dryRun {
		fmt.Fprintln(out, "DRY RUN: no change was made.")
	}
	topErr := kerr.ErrorForCode(resp.ErrorCode)
	topMsg := ""
	if resp.ErrorMessage != nil {
		topMsg = *resp.ErrorMessage
	}
	failed := 0
	for _, name := range names {
		err, msg := topErr, topMsg
		for _, r := range resp.Results {
			if r.Feature == name && topErr == nil {
				err = kerr.ErrorForCode(r.ErrorCode)
				if r.ErrorMessage != nil {
					msg = *r.ErrorMessage
				}
			}
		}
		switch {
		case err != nil:
			failed++
			fmt.Fprintf(out, "Could not %s %s to %d. %s\n", verb, name, levels[name], errText(err, msg))
		case dryRun:
			fmt.Fprintf(out, "%s can be %sd to %d.\n", name, verb, levels[name])
		default:
			fmt.Fprintf(out, "%s was %sd to %d.\n", name, verb, levels[name])
		}
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d of %d features", ErrPartialFailure, failed, len(names))
	}
	return nil
}
