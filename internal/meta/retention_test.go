package meta

import "testing"

// TestRetentionPolicyOf: what apply reads of a topic's configs, over the
// proposer's broker defaults.
func TestRetentionPolicyOf(t *testing.T) {
	for _, tc := range []struct {
		configs map[string]string
		want    RetentionPolicy
	}{
		{nil, RetentionPolicy{Delete: true, Ms: 100, Bytes: -1}},
		{map[string]string{"retention.ms": " 5 ", "retention.bytes": "7"}, RetentionPolicy{Delete: true, Ms: 5, Bytes: 7}},
		{map[string]string{"retention.ms": "-1"}, RetentionPolicy{Delete: true, Ms: -1, Bytes: -1}},
		{map[string]string{"retention.ms": "soon"}, RetentionPolicy{Delete: true, Ms: 100, Bytes: -1}},
		{map[string]string{"cleanup.policy": "compact"}, RetentionPolicy{Ms: 100, Bytes: -1}},
		{map[string]string{"cleanup.policy": "compact, delete"}, RetentionPolicy{Delete: true, Ms: 100, Bytes: -1}},
		{map[string]string{"cleanup.policy": "delete,compact"}, RetentionPolicy{Delete: true, Ms: 100, Bytes: -1}},
	} {
		if got := RetentionPolicyOf(tc.configs, 100, -1); got != tc.want {
			t.Errorf("%v: %+v, want %+v", tc.configs, got, tc.want)
		}
	}
	if (RetentionPolicy{Delete: true, Ms: -1, Bytes: -1}).Limited() || (RetentionPolicy{Ms: 5, Bytes: 5}).Limited() {
		t.Error("a policy that keeps everything is limited")
	}
}
