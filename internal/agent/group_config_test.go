package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/agent"
)

// TestGroupSettingsReachCoordinator: --group-min-session-timeout bounds
// the session timeouts JoinGroup accepts.
func TestGroupSettingsReachCoordinator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a, err := agent.Start(ctx, agent.Config{
		DataDir:                t.TempDir(),
		KafkaListen:            "127.0.0.1:0",
		HTTPListen:             "127.0.0.1:0",
		GroupMinSessionTimeout: 20 * time.Second,
	}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, a)
	cl := client(t, a.KafkaAddr())
	for _, tc := range []struct {
		session time.Duration
		want    int16
	}{{10 * time.Second, kerr.InvalidSessionTimeout.Code}, {30 * time.Second, kerr.MemberIDRequired.Code}} {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 5
		req.Group, req.ProtocolType = "g", "consumer"
		req.SessionTimeoutMillis = int32(tc.session / time.Millisecond)
		req.RebalanceTimeoutMillis = 60000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != tc.want {
			t.Errorf("session timeout %v: %v, want %v", tc.session, kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(tc.want))
		}
	}
}
