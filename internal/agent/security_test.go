package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandkafka/strand/internal/agent"
)

// throttles counts the throttles brokers impose on a client.
type throttles struct{ n atomic.Int64 }

func (h *throttles) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

// TestSecurityEndToEnd runs the security pieces together over real
// authentication, as an operator would: a SASL listener, the bootstrap
// user as the super user, a user created through the SCRAM API, ACLs that
// decide what the user may do, and a client quota on the user that
// throttles it. The kafka package's ACL and quota tests stand a client id
// in for the principal; here the principal comes from SCRAM.
func TestSecurityEndToEnd(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("admin-pw-1234\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a, err := agent.Start(ctx, agent.Config{
		DataDir:                   t.TempDir(),
		Listeners:                 "SASL_PLAINTEXT://127.0.0.1:0",
		SASLBootstrapUser:         "admin",
		SASLBootstrapPasswordFile: pwFile,
		Authorizer:                "standard",
		SuperUsers:                "User:admin",
	}, quietLogger())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer stop(t, a)
	addr := a.ListenerAddr("SASL_PLAINTEXT")
	login := func(user, pass string) kgo.Opt {
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())
	}
	admin := kadm.NewClient(client(t, addr, login("admin", "admin-pw-1234")))

	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatalf("super user creates a topic: %v", err)
	}
	res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pw"}})
	if err == nil {
		err = res["alice"].Err
	}
	if err != nil {
		t.Fatalf("create alice: %v", err)
	}

	hook := new(throttles)
	alice := client(t, addr, login("alice", "alice-pw"), kgo.WithHooks(hook), kgo.RequestRetries(0),
		kgo.RecordRetries(0), kgo.DefaultProduceTopic("orders"))
	record := &kgo.Record{Value: make([]byte, 64<<10)}
	if err := alice.ProduceSync(ctx, record).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces without an ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if _, err := kadm.NewClient(alice).DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice describes users: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}

	acls := kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite)
	created, err := admin.CreateACLs(ctx, acls)
	if err == nil {
		for _, c := range created {
			err = errors.Join(err, c.Err)
		}
	}
	if err != nil {
		t.Fatalf("grant alice Write on orders: %v", err)
	}
	// A new client: kgo does not retry a topic it was refused.
	alice = client(t, addr, login("alice", "alice-pw"), kgo.WithHooks(hook), kgo.DefaultProduceTopic("orders"))
	if err := alice.ProduceSync(ctx, record).FirstErr(); err != nil {
		t.Fatalf("alice produces with Write granted: %v", err)
	}
	if hook.n.Load() != 0 {
		t.Fatalf("alice was throttled before any quota was set")
	}

	// 1 KiB/s for User:alice: the next 64 KiB are far over it.
	user := "alice"
	altered, err := admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: &user}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}},
	}})
	if err == nil {
		for _, q := range altered {
			err = errors.Join(err, q.Err)
		}
	}
	if err != nil {
		t.Fatalf("quota for alice: %v", err)
	}
	// The quota reaches the agent's enforcement through the log; produce
	// until a response carries a throttle. A quota never enforced fails
	// at the context's deadline.
	for hook.n.Load() == 0 {
		if err := alice.ProduceSync(ctx, record).FirstErr(); err != nil {
			t.Fatalf("alice produces under a quota: %v", err)
		}
	}
}
