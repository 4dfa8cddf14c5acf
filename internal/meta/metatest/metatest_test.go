package metatest

import (
	"context"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/meta"
)

// A proposal is applied when it returns, views are snapshots, and the
// log clock follows the DB's clock.
func TestDB(t *testing.T) {
	ctx := context.Background()
	ms := int64(1_700_000_000_000)
	db := New(func() time.Time { return time.UnixMilli(ms) })
	before := db.View()
	defer before.Close()
	res, err := db.Propose(ctx, meta.CreateTopic{Name: "t", Partitions: 2})
	if err != nil || res.Code != 0 {
		t.Fatalf("create: %v, %v", err, res.Err())
	}
	ms += 5
	if _, err := db.ProposeBatch(ctx, []meta.Command{meta.CreateTopic{Name: "u", Partitions: 1}, meta.CreateTopic{Name: "t", Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	v := db.View()
	defer v.Close()
	for _, name := range []string{"t", "u"} {
		if _, ok, err := v.Topic(name); !ok || err != nil {
			t.Fatalf("topic %s: %v, %v", name, ok, err)
		}
	}
	if _, ok, _ := before.Topic("t"); ok {
		t.Fatal("a view taken before the proposal sees it")
	}
	if c, err := v.LogClock(); err != nil || c != ms {
		t.Fatalf("log clock %d, %v; want %d", c, err, ms)
	}
	if next, err := v.NextToApply(); err != nil || next != 2 {
		t.Fatalf("next to apply %d, %v; want 2", next, err)
	}
}
