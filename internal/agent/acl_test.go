package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/agent"
)

// --authorizer reaches the Kafka server: with it, a PLAINTEXT client
// (User:ANONYMOUS) may do nothing no ACL allows, unless --super-users
// names it; the ACLs it then creates restart with the agent.
func TestAuthorizerSettings(t *testing.T) {
	dir := t.TempDir()
	cfg := agent.Config{DataDir: dir, Authorizer: "standard"}
	a := startWith(t, cfg, nil)
	adm := kadm.NewClient(client(t, a.KafkaAddr()))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	res, err := adm.CreateTopic(ctx, 1, -1, nil, "locked")
	if err == nil {
		err = res.Err
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("CreateTopic without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	stop(t, a)

	cfg.SuperUsers = "User:admin;User:ANONYMOUS"
	a = startWith(t, cfg, nil)
	adm = kadm.NewClient(client(t, a.KafkaAddr()))
	if res, err := adm.CreateTopic(ctx, 1, -1, nil, "locked"); err != nil || res.Err != nil {
		t.Fatalf("CreateTopic as a super user: %v, %v", err, res.Err)
	}
	created, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("locked").Operations(kadm.OpRead))
	if err != nil || len(created) != 1 || created[0].Err != nil {
		t.Fatalf("CreateACLs: %+v, %v", created, err)
	}
	stop(t, a)

	a = startWith(t, cfg, nil)
	adm = kadm.NewClient(client(t, a.KafkaAddr()))
	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Operations().Allow().Deny().AllowHosts().DenyHosts())
	if err != nil || len(described) != 1 || len(described[0].Described) != 1 || described[0].Described[0].Principal != "User:alice" {
		t.Fatalf("ACLs after a restart: %+v, %v", described, err)
	}
}

func TestAuthorizerConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  agent.Config
		want string
	}{
		{agent.Config{Authorizer: "acl"}, "authorizer \"acl\""},
		{agent.Config{SuperUsers: "admin"}, "super-users"},
	} {
		c.cfg.DataDir = t.TempDir()
		c.cfg.SetDefaults()
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v): %v, want %q", c.cfg, err, c.want)
		}
	}
	ok := agent.Config{DataDir: t.TempDir(), Authorizer: "org.apache.kafka.metadata.authorizer.StandardAuthorizer", SuperUsers: "User:a; User:b"}
	ok.SetDefaults()
	if err := ok.Validate(); err != nil {
		t.Errorf("Kafka's class name and super.users: %v", err)
	}
}
