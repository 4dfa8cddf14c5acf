package agent

import (
	"context"

	"github.com/strandkafka/strand/internal/gc"
	"github.com/strandkafka/strand/internal/meta"
)

// deadBytesOf is kafka.Deps.DeadBytes over d.
func deadBytesOf(d *gc.DeadBytes) func(context.Context, *meta.View) (map[meta.TopicID]map[int32]int64, error) {
	return func(ctx context.Context, v *meta.View) (map[meta.TopicID]map[int32]int64, error) {
		r, err := d.ByPartition(ctx, v)
		return r.Bytes, err
	}
}
