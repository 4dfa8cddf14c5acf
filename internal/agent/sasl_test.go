package agent_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/certs"
	"github.com/strandkafka/strand/internal/certs/certstest"
)

// TestSASLBootstrapUser starts an agent whose only listeners need SASL
// (SASL_PLAINTEXT and SASL_SSL) with a bootstrap user whose password is
// in a file: the user produces and consumes over SCRAM-SHA-512 on
// SASL_SSL and PLAIN on SASL_PLAINTEXT, a wrong password gets
// SASL_AUTHENTICATION_FAILED, and the password appears in no log line.
// A restart keeps the user's credentials (it is not created again).
func TestSASLBootstrapUser(t *testing.T) {
	const password = "bootstrap-pw-4711"
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := certstest.NewCA(t, "ca")
	server := ca.Server(t, "server")
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	dir := t.TempDir()
	cfg := agent.Config{
		DataDir:                   dir,
		Listeners:                 "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		TLSCertFile:               server.CertFile,
		TLSKeyFile:                server.KeyFile,
		SASLBootstrapUser:         "admin",
		SASLBootstrapPasswordFile: pwFile,
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a, err := agent.Start(ctx, cfg, logger)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	tlsCfg, err := certs.ClientConfig(certs.ClientFiles{CAFile: ca.CertFile})
	if err != nil {
		t.Fatal(err)
	}
	scram512 := kgo.SASL(scram.Auth{User: "admin", Pass: password}.AsSha512Mechanism())
	sslOpts := []kgo.Opt{kgo.DialTLSConfig(tlsCfg), scram512}
	plainAddr, sslAddr := a.ListenerAddr("SASL_PLAINTEXT"), a.ListenerAddr("SASL_SSL")

	plainOpt := kgo.SASL(plain.Auth{User: "admin", Pass: password}.AsMechanism())
	if _, err := kadm.NewClient(client(t, plainAddr, plainOpt)).CreateTopic(ctx, 1, 1, nil, "guarded"); err != nil {
		t.Fatalf("create topic over SASL_PLAINTEXT with PLAIN: %v", err)
	}
	p := client(t, sslAddr, sslOpts...)
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "guarded", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce over SASL_SSL with SCRAM-SHA-512: %v", err)
	}
	c := client(t, plainAddr, plainOpt,
		kgo.ConsumeTopics("guarded"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := c.PollFetches(ctx)
	if err := fs.Err0(); err != nil || fs.NumRecords() != 1 {
		t.Fatalf("consume over SASL_PLAINTEXT with PLAIN: %d records, %v", fs.NumRecords(), err)
	}

	bad := client(t, sslAddr, kgo.DialTLSConfig(tlsCfg), kgo.SASL(scram.Auth{User: "admin", Pass: "guess"}.AsSha512Mechanism()), kgo.RequestRetries(0))
	if _, err := kadm.NewClient(bad).ListTopics(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	users, err := kadm.NewClient(p).DescribeUserSCRAMs(ctx, "admin")
	if err != nil || len(users["admin"].CredInfos) != 2 {
		t.Fatalf("described the bootstrap user as %+v, %v", users, err)
	}
	stop(t, a)

	a, err = agent.Start(ctx, cfg, logger)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Cleanup(func() { stop(t, a) })
	again := client(t, a.ListenerAddr("SASL_SSL"), sslOpts...)
	if _, err := kadm.NewClient(again).ListTopics(ctx); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	if n := strings.Count(logs.String(), "created the SASL bootstrap user"); n != 1 {
		t.Errorf("bootstrap user created %d times over two starts, want 1", n)
	}
	if strings.Contains(logs.String(), password) {
		t.Error("the bootstrap password appears in the log")
	}
}

// TestSASLConfigErrors: a bootstrap user needs a password from exactly
// one place, and mechanisms must be known.
func TestSASLConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  agent.Config
		want string
	}{
		{"no password", agent.Config{SASLBootstrapUser: "admin"}, "needs STRAND_SASL_BOOTSTRAP_PASSWORD"},
		{"two passwords", agent.Config{SASLBootstrapUser: "admin", SASLBootstrapPassword: "a", SASLBootstrapPasswordFile: "f"}, "give one"},
		{"password without user", agent.Config{SASLBootstrapPassword: "a"}, "needs --sasl-bootstrap-user"},
		{"unknown mechanism", agent.Config{SASLEnabledMechanisms: "PLAIN,GSSAPI"}, "GSSAPI"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.DataDir = t.TempDir()
			tc.cfg.SetDefaults()
			if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
