package main

// "Did you mean" for a mistyped setting: an unknown flag of serve or
// config print, or an unknown key of the --config file.

import (
	"fmt"
	"regexp"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// didYouMean returns ` (did you mean PREFIX+NAME?)` naming the flag of
// fs closest to name, or "" when none is close: at most a third of the
// name's letters (and at least one) off, as typos are.
func didYouMean(fs *pflag.FlagSet, name, prefix string) string {
	best, bestDist := "", len(name)/3+1
	if bestDist < 2 {
		bestDist = 2
	}
	bestDist++ // strictly below the bound, found or not
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Hidden || fl.Name == helpFlag || fl.Name == configFlag {
			return
		}
		if d := editDistance(name, fl.Name); d < bestDist || (d == bestDist && fl.Name < best) {
			best, bestDist = fl.Name, d
		}
	})
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s%s?)", prefix, best)
}

// unknownFlag matches pflag's error for a flag it does not know.
var unknownFlag = regexp.MustCompile(`^unknown flag: --([^ =]+)$`)

// suggestFlag is a cobra flag error func that adds the closest flag's
// name to "unknown flag: --x".
func suggestFlag(cmd *cobra.Command, err error) error {
	if m := unknownFlag.FindStringSubmatch(err.Error()); m != nil {
		if s := didYouMean(cmd.Flags(), m[1], "--"); s != "" {
			return fmt.Errorf("%w%s", err, s)
		}
	}
	return err
}

// editDistance is the Levenshtein distance of a and b, in bytes (flag
// names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
