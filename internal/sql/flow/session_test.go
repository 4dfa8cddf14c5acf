package flow

import (
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sql/types"
)

func TestSessionMergeSplit(t *testing.T) {
	// (k text, t timestamp), sessions per k with a 10 s gap.
	g := single(&Session{TimeCol: 1, PartitionBy: []int{0}, Gap: 10 * time.Second})
	runSteps(t, g, Options{}, []step{
		{in: [][]types.Change{{ins("a", ts(0)), ins("a", ts(25)), ins("b", ts(5))}}, want: []string{
			"+1 (a, 0s, 0s, 10s)",
			"+1 (a, 25s, 25s, 35s)",
			"+1 (b, 5s, 5s, 15s)",
		}},
		// 9 joins 0's session (a gap under 10 s); 25 stays apart.
		{in: [][]types.Change{{ins("a", ts(9))}}, want: []string{
			"+1 (a, 0s, 0s, 19s)",
			"+1 (a, 9s, 0s, 19s)",
			"-1 (a, 0s, 0s, 10s)",
		}},
		// 17 merges [0, 9] and [25]: one session 0..35.
		{in: [][]types.Change{{ins("a", ts(17))}}, want: []string{
			"+1 (a, 0s, 0s, 35s)",
			"+1 (a, 17s, 0s, 35s)",
			"+1 (a, 25s, 0s, 35s)",
			"+1 (a, 9s, 0s, 35s)",
			"-1 (a, 0s, 0s, 19s)",
			"-1 (a, 25s, 25s, 35s)",
			"-1 (a, 9s, 0s, 19s)",
		}},
		// Deleting 17 splits it again; b is untouched.
		{in: [][]types.Change{{del("a", ts(17))}}, want: []string{
			"+1 (a, 0s, 0s, 19s)",
			"+1 (a, 25s, 25s, 35s)",
			"+1 (a, 9s, 0s, 19s)",
			"-1 (a, 0s, 0s, 35s)",
			"-1 (a, 17s, 0s, 35s)",
			"-1 (a, 25s, 0s, 35s)",
			"-1 (a, 9s, 0s, 35s)",
		}},
	})
}
