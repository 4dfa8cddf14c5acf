package compact

import "github.com/strandkafka/strand/internal/meta"

// PartitionLevels is what `strand topic describe` shows of a partition's
// storage: its index entries and the objects they point into, level 0
// (multi-partition flushes) and compacted (per-partition objects).
// Markers are entries without an object and are counted in Entries only.
type PartitionLevels struct {
	Partition        int32 `json:"partition"`
	Entries          int64 `json:"entries"`
	Objects          int64 `json:"objects"`
	Level0Entries    int64 `json:"level0_entries"`
	Level0Objects    int64 `json:"level0_objects"`
	CompactedEntries int64 `json:"compacted_entries"`
	CompactedObjects int64 `json:"compacted_objects"`
}

// Describe walks the index of each of t's partitions in v.
func Describe(v *meta.View, t meta.Topic) ([]PartitionLevels, error) {
	out := make([]PartitionLevels, 0, t.Partitions)
	for p := range t.Partitions {
		l := PartitionLevels{Partition: p}
		it, err := v.Seek(t.ID, p, 0)
		if err != nil {
			return nil, err
		}
		var last string // entries of one object are mostly adjacent
		seen := map[string]bool{}
		for it.Next() {
			e := it.Entry()
			l.Entries++
			if e.Control {
				continue
			}
			c := Compacted(e.ObjectKey)
			if c {
				l.CompactedEntries++
			} else {
				l.Level0Entries++
			}
			if e.ObjectKey == last || seen[e.ObjectKey] {
				continue
			}
			last, seen[e.ObjectKey] = e.ObjectKey, true
			l.Objects++
			if c {
				l.CompactedObjects++
			} else {
				l.Level0Objects++
			}
		}
		err = it.Err()
		it.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}
