package catalog

import (
	"fmt"
	"testing"

	"github.com/strandkafka/strand/internal/sql/types"
)

// TestKeyPrefix: a view is looked up by the longest run of its key
// columns, from the first, that the WHERE gives values for.
func TestKeyPrefix(t *testing.T) {
	for _, c := range []struct {
		key   []int
		width int
		cols  []int
		vals  types.Row
		want  string
	}{
		{[]int{2}, 3, []int{2}, types.Row{int64(7)}, "[7]"},
		{[]int{2}, 3, []int{0}, types.Row{int64(7)}, "[]"},
		{[]int{1, 0}, 3, []int{0, 1}, types.Row{"a", "b"}, "[b a]"},
		{[]int{1, 0}, 3, []int{0}, types.Row{"a"}, "[]"},
		{[]int{1, 0}, 3, []int{1}, types.Row{"b"}, "[b]"},
		{nil, 3, []int{0, 2}, types.Row{int64(1), int64(3)}, "[1]"},
		{[]int{}, 3, []int{1, 0}, types.Row{int64(2), int64(1)}, "[1 2]"},
		{nil, 2, []int{0, 1}, types.Row{int64(1), int64(2)}, "[1 2]"},
		{nil, 2, nil, nil, "[]"},
	} {
		if got := fmt.Sprint(keyPrefix(c.key, c.width, c.cols, c.vals)); got != c.want {
			t.Errorf("key %v width %d cols %v vals %v: got %s, want %s", c.key, c.width, c.cols, c.vals, got, c.want)
		}
	}
}
