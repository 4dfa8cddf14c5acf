package agent_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/certs/certstest"
)

// TestSQLEndpoint: with no users a loopback SQL endpoint trusts; once a
// SCRAM user exists (made over Kafka), it asks for that user's password,
// over TLS on the agent's certificate.
func TestSQLEndpoint(t *testing.T) {
	ca := certstest.NewCA(t, "sql")
	pair := ca.Server(t, "agent")
	a := startWith(t, agent.Config{DataDir: t.TempDir(), SQLListen: "127.0.0.1:0", SQLTLS: true,
		TLSCertFile: pair.CertFile, TLSKeyFile: pair.KeyFile}, nil)
	host, port, _ := net.SplitHostPort(a.SQLAddr())
	url := func(user, pw string) string {
		return fmt.Sprintf("postgres://%s:%s@%s:%s/strand?sslmode=verify-full&sslrootcert=%s", user, pw, host, port, ca.CertFile)
	}
	ctx := context.Background()
	query := func(u string) error {
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var user string
		return conn.QueryRow(ctx, "SHOW session_authorization").Scan(&user)
	}
	if err := query(url("anyone", "")); err != nil {
		t.Fatalf("no users, loopback: %v", err)
	}

	adm := kadm.NewClient(client(t, a.KafkaAddr()))
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-pw"}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	// Applied through the log: the view this agent reads has it once
	// AlterUserScramCredentials has answered.
	if err := query(url("alice", "alice-pw")); err != nil {
		t.Fatalf("alice with her password: %v", err)
	}
	for _, c := range [][2]string{{"alice", "wrong"}, {"anyone", ""}} {
		var pe *pgconn.PgError
		if err := query(url(c[0], c[1])); !errors.As(err, &pe) || pe.Code != "28P01" {
			t.Errorf("%s/%q: got %v, want 28P01", c[0], c[1], err)
		}
	}
}
