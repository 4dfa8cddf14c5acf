package agent

import (
	"strings"
	"testing"
)

// TestQuotaWindowFlags: the quota window settings take Kafka's ranges.
func TestQuotaWindowFlags(t *testing.T) {
	for _, tc := range []struct {
		num, size int
		wantErr   string
	}{
		{0, 0, ""},
		{11, 1, ""},
		{1, 3600, ""},
		{-1, 1, "quota-window-num -1"},
		{11, -1, "quota-window-size-seconds -1"},
		{11, 3601, "quota-window-size-seconds 3601"},
	} {
		cfg := Config{QuotaWindowNum: tc.num, QuotaWindowSizeSeconds: tc.size}
		cfg.SetDefaults()
		err := cfg.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("num %d size %d: %v", tc.num, tc.size, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("num %d size %d: %v, want %q", tc.num, tc.size, err, tc.wantErr)
		}
	}
}
