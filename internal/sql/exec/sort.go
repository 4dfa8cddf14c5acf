package exec

import (
	"slices"

	"github.com/strandkafka/strand/internal/sql/types"
)

func sortStable(rows []types.Row, cmp func(a, b types.Row) int) { slices.SortStableFunc(rows, cmp) }
