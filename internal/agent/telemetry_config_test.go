package agent

import (
	"slices"
	"testing"
	"time"
)

// --client-telemetry-metrics: "*" asks for all, "none" for nothing,
// otherwise the listed prefixes; an unset flag is the default, all.
func TestClientTelemetryConfig(t *testing.T) {
	for _, tc := range []struct {
		flag string
		want []string
	}{
		{"", []string{"*"}},
		{"*", []string{"*"}},
		{"none", nil},
		{"org.apache.kafka.producer., org.apache.kafka.consumer.fetch,", []string{"org.apache.kafka.producer.", "org.apache.kafka.consumer.fetch"}},
	} {
		c := Config{ClientTelemetryMetrics: tc.flag, ClientTelemetryPushInterval: 5 * time.Second}
		c.SetDefaults()
		got := c.clientTelemetry(nil)
		if !slices.Equal(got.Metrics, tc.want) || got.PushInterval != 5*time.Second {
			t.Errorf("%q: %v %v, want %v", tc.flag, got.Metrics, got.PushInterval, tc.want)
		}
	}
}
