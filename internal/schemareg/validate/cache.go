package validate

import "github.com/strandkafka/strand/internal/schemareg"

// checker is what a schema id is checked with: its type and its
// PayloadChecker, or why it cannot check anything.
type checker struct {
	typ     schemareg.Type
	payload schemareg.PayloadChecker
	// weight is the schema text's length, what the cache bounds.
	weight int64
}
