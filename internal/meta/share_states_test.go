package meta

import "testing"

// TestShareStatesUpTo: a group's states come in key order up to the
// limit, truncated says when more are left, and another group's states
// (one whose name starts with this one's) are never counted.
func TestShareStatesUpTo(t *testing.T) {
	r := openReplica(t, newTestLog(), nil, "w")
	mustOK(t, r, FinalizeFeatures{Features: []FeatureLevel{{Name: FeatureMetadata, Level: LevelShareGroups}}})
	id := mustOK(t, r, CreateTopic{Name: "t", Partitions: 3}).TopicID
	for p := range int32(3) {
		mustOK(t, r, ShareStateAlter{Group: "g", TopicID: id, Partition: p})
	}
	mustOK(t, r, ShareStateAlter{Group: "gg", TopicID: id, Partition: 0})
	v := r.View()
	defer v.Close()
	for _, c := range []struct {
		limit     int
		want      int
		truncated bool
	}{{2, 2, true}, {3, 3, false}, {10, 3, false}} {
		states, truncated, err := v.ShareStatesUpTo("g", c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(states) != c.want || truncated != c.truncated {
			t.Errorf("limit %d: %d states, truncated %v; want %d, %v", c.limit, len(states), truncated, c.want, c.truncated)
		}
		for i, s := range states {
			if s.Group != "g" || s.Partition != int32(i) {
				t.Errorf("limit %d: state %d is %+v, want group g, partition %d", c.limit, i, s, i)
			}
		}
	}
}
