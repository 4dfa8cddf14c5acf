package meta

import "testing"

func TestValidateGroupConfig(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{GroupShareAutoOffsetReset, "earliest", true},
		{GroupShareAutoOffsetReset, "latest", true},
		{GroupShareAutoOffsetReset, "by_duration:PT1H30M", true},
		{GroupShareAutoOffsetReset, "by_duration:P1DT0.5S", true},
		{GroupShareAutoOffsetReset, "by_duration:P", false},
		{GroupShareAutoOffsetReset, "by_duration:PT", false},
		{GroupShareAutoOffsetReset, "by_duration:1h", false},
		{GroupShareAutoOffsetReset, "none", false},
		{GroupShareIsolationLevel, "read_committed", true},
		{GroupShareIsolationLevel, "READ_COMMITTED", false},
		{GroupShareRecordLockDurationMs, "15000", true},
		{GroupShareRecordLockDurationMs, "14999", false},
		{GroupShareRecordLockDurationMs, "60001", false},
		{GroupShareRecordLockDurationMs, "x", false},
		{GroupShareSessionTimeoutMs, "60000", true},
		{GroupShareHeartbeatIntervalMs, "4999", false},
		{GroupShareDeliveryCountLimit, "1", false},
		{GroupShareDeliveryCountLimit, "10", true},
		{GroupConsumerSessionTimeoutMs, "45000", true},
		{"group.share.session.timeout.ms", "45000", false}, // broker-level name
	} {
		err := ValidateGroupConfig(tc.name, tc.value)
		if (err == nil) != tc.ok {
			t.Errorf("%s=%s: err %v, want ok %v", tc.name, tc.value, err, tc.ok)
		}
	}
	if _, ms, _ := ParseShareAutoOffsetReset("by_duration:P1DT1H0.25S"); ms != 25*3600*1000+250 {
		t.Errorf("by_duration:P1DT1H0.25S is %d ms", ms)
	}
	// Heartbeat at or above the session timeout, defaults filling in.
	if err := ValidateGroupConfigs(map[string]string{GroupShareHeartbeatIntervalMs: "15000", GroupShareSessionTimeoutMs: "45000"}); err != nil {
		t.Errorf("15s under 45s refused: %v", err)
	}
	cfg := map[string]string{GroupConsumerHeartbeatIntervalMs: "15000", GroupConsumerSessionTimeoutMs: "45000"}
	if err := ValidateGroupConfigs(cfg); err != nil {
		t.Error(err)
	}
	if GroupConfigInt(nil, GroupShareSessionTimeoutMs) != 45000 || GroupConfigInt(map[string]string{GroupShareSessionTimeoutMs: "50000"}, GroupShareSessionTimeoutMs) != 50000 {
		t.Error("GroupConfigInt does not read defaults and values")
	}
}
