package jdbcsink

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
)

// TestRandomChangesMatchModel: random creates, updates, deletes (op d,
// with or without a tombstone, or a tombstone alone) of few keys over
// three partitions, in Debezium envelopes, a column added half-way,
// written with a random batch.size: the table ends as the records say
// (each key's last change), whatever the batches coalesced.
func TestRandomChangesMatchModel(t *testing.T) {
	targets(t, func(t *testing.T, d *db) {
		rng := testRand(t)
		fieldsV1 := []map[string]any{
			{"field": "id", "type": "int32", "optional": false},
			{"field": "v", "type": "int64", "optional": true},
			{"field": "s", "type": "string", "optional": true},
		}
		fieldsV2 := append(slices.Clone(fieldsV1), map[string]any{"field": "extra", "type": "string", "optional": true})
		topic := uniq("srv.public.model")
		table := "srv_public_" + topic[len("srv.public."):]
		kafka := cluster(t, 3, topic)
		p := newProducer(t, kafka)
		model := map[int]string{} // id -> "id|v|s|extra"
		const changes, keys = 1500, 40
		for i := range changes {
			id := rng.IntN(keys)
			fields := fieldsV1
			if i >= changes/2 {
				fields = fieldsV2
			}
			_, exists := model[id]
			switch r := rng.IntN(10); {
			case r < 6 || !exists: // create or update
				row := map[string]any{"id": id, "v": rng.Int64N(1 << 50), "s": strconv.Itoa(rng.IntN(1000))}
				extra := "∅"
				if len(fields) == 4 && rng.IntN(2) == 0 {
					row["extra"] = fmt.Sprintf("x%d", i)
					extra = row["extra"].(string)
				}
				op := "c"
				if exists {
					op = "u"
				}
				p.send(topic, intKey(id), envelope(fields, op, nil, row))
				model[id] = fmt.Sprintf("%d|%d|%s|%s", id, row["v"], row["s"], extra)
			case r < 8:
				p.send(topic, intKey(id), envelope(fields, "d", map[string]any{"id": id}, nil))
				p.send(topic, intKey(id), nil)
				delete(model, id)
			case r < 9:
				p.send(topic, intKey(id), envelope(fields, "d", map[string]any{"id": id}, nil))
				delete(model, id)
			default:
				p.send(topic, intKey(id), nil)
				delete(model, id)
			}
		}
		name := uniq("model")
		batch := 1 + rng.IntN(200)
		t.Logf("batch.size %d", batch)
		r := start(t, name, d.config(topic, "insert.mode", "upsert", "primary.key.mode", "record_key",
			"delete.enabled", "true", "schema.evolution", "basic", "batch.size", strconv.Itoa(batch)), kafka, nil)
		waitCaughtUp(t, d, name, p, r)
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, row := range model {
			want = append(want, row)
		}
		got := d.rows(t, table, d.q("id"), d.text("v"), d.text("s"), d.text("extra"))
		// rows orders by id as a number (an integer column).
		slices.SortFunc(want, func(a, b string) int { return idOf(a) - idOf(b) })
		if !slices.Equal(got, want) {
			t.Errorf("table:\n got %q\nwant %q", got, want)
		}
	})
}

func idOf(row string) int {
	var id int
	fmt.Sscanf(row, "%d|", &id)
	return id
}

// testRand is a test's random source, its seed logged; STRAND_TEST_SEED
// replays one.
func testRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := rand.Uint64()
	if s := os.Getenv("STRAND_TEST_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("STRAND_TEST_SEED: %v", err)
		}
	}
	t.Logf("seed %d (replay with STRAND_TEST_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed))
}
