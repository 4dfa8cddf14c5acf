package cli

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/agent"
)

// TestACLCommands creates, lists and deletes ACLs through `strand acl`
// against a fake cluster, and checks the rows each prints.
func TestACLCommands(t *testing.T) {
	brokers := newCluster(t)
	r := mustRun(t, brokers, "", "acl", "create", "--allow-principal", "User:alice", "--operation", "read",
		"--operation", "describe", "--topic", "orders")
	if got := rows(r.stdout); len(got) != 3 || got[1][len(got[1])-1] != "OK" || got[2][len(got[2])-1] != "OK" {
		t.Fatalf("create printed:\n%s", r.stdout)
	}
	mustRun(t, brokers, "", "acl", "create", "--deny-principal", "User:bob", "--operation", "all",
		"--group", "app-", "--resource-pattern-type", "prefixed")

	list := func(args ...string) []string {
		t.Helper()
		r := mustRun(t, brokers, "", append([]string{"acl", "list"}, args...)...)
		var out []string
		for _, row := range rows(r.stdout)[1:] {
			out = append(out, strings.Join(row, " "))
		}
		return out
	}
	all := []string{
		"User:alice * TOPIC orders LITERAL DESCRIBE ALLOW",
		"User:alice * TOPIC orders LITERAL READ ALLOW",
		"User:bob * GROUP app- PREFIXED ALL DENY",
	}
	if got := list(); !slices.Equal(got, all) {
		t.Fatalf("list:\n%q\nwant\n%q", got, all)
	}
	if got := list("--group", "app-", "--resource-pattern-type", "prefixed"); !slices.Equal(got, all[2:]) {
		t.Fatalf("list of prefixed group app-: %q", got)
	}
	if got := list("--principal", "User:alice", "--operation", "read"); !slices.Equal(got, all[1:2]) {
		t.Fatalf("list of alice's reads: %q", got)
	}
	if got := list("--permission", "deny"); !slices.Equal(got, all[2:]) {
		t.Fatalf("list of denies: %q", got)
	}

	r = mustRun(t, brokers, "", "acl", "delete", "--topic", "orders", "--operation", "read")
	if got := rows(r.stdout); len(got) != 2 || strings.Join(got[1], " ") != all[1] {
		t.Fatalf("delete printed:\n%s", r.stdout)
	}
	if got := list(); !slices.Equal(got, []string{all[0], all[2]}) {
		t.Fatalf("list after delete: %q", got)
	}
}

func TestACLUsageErrors(t *testing.T) {
	brokers := newCluster(t)
	for _, args := range [][]string{
		{"acl", "create", "--operation", "read", "--topic", "t"},                               // no principal
		{"acl", "create", "--allow-principal", "User:a", "--topic", "t"},                       // no operation
		{"acl", "create", "--allow-principal", "User:a", "--operation", "read"},                // no resource
		{"acl", "create", "--allow-principal", "User:a", "--operation", "any", "--topic", "t"}, // any is a filter
		{"acl", "create", "--allow-principal", "User:a", "--operation", "read", "--topic", "t", "--resource-pattern-type", "match"},
		{"acl", "list", "--operation", "reed"},
		{"acl", "list", "--permission", "maybe"},
		{"acl", "delete"}, // would match every ACL
	} {
		if r := run(t, brokers, "", args...); !errors.Is(r.err, ErrUsage) {
			t.Errorf("strand %s: %v, want a usage error", strings.Join(args, " "), r.err)
		}
	}
}

// TestACLSubjects creates, lists and deletes SUBJECT ACLs (the schema
// registry's, which kadm's builder cannot name) through `strand acl
// --subject` against an agent, beside a topic's, and reads them back
// with a raw DescribeAcls as an independent check.
func TestACLSubjects(t *testing.T) {
	a, err := agent.Start(t.Context(), agent.Config{DataDir: t.TempDir(), KafkaListen: "127.0.0.1:0", SnapshotInterval: agent.SnapshotsOff},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("agent.Start: %v", err)
	}
	t.Cleanup(func() { a.Stop(t.Context()) })
	brokers := a.KafkaAddr()
	r := mustRun(t, brokers, "", "acl", "create", "--allow-principal", "User:alice", "--operation", "read",
		"--operation", "write", "--subject", "orders-value")
	if got := rows(r.stdout); len(got) != 3 || strings.Join(got[1], " ") != "User:alice * SUBJECT orders-value LITERAL READ ALLOW OK" {
		t.Fatalf("create printed:\n%s", r.stdout)
	}
	mustRun(t, brokers, "", "acl", "create", "--deny-principal", "User:bob", "--operation", "all",
		"--subject", "orders-", "--topic", "orders-", "--resource-pattern-type", "prefixed")

	list := func(args ...string) []string {
		t.Helper()
		r := mustRun(t, brokers, "", append([]string{"acl", "list"}, args...)...)
		var out []string
		for _, row := range rows(r.stdout)[1:] {
			out = append(out, strings.Join(row, " "))
		}
		return out
	}
	all := []string{
		"User:alice * SUBJECT orders-value LITERAL READ ALLOW",
		"User:alice * SUBJECT orders-value LITERAL WRITE ALLOW",
		"User:bob * SUBJECT orders- PREFIXED ALL DENY",
		"User:bob * TOPIC orders- PREFIXED ALL DENY",
	}
	if got := list(); !slices.Equal(got, all) {
		t.Fatalf("list:\n%q\nwant\n%q", got, all)
	}
	if got := list("--subject", "orders-value", "--resource-pattern-type", "match"); !slices.Equal(got, all[:3]) {
		t.Fatalf("list of the patterns matching subject orders-value: %q", got)
	}
	if got := list("--subject", "orders-value", "--operation", "write", "--principal", "User:alice"); !slices.Equal(got, all[1:2]) {
		t.Fatalf("list of alice's writes on orders-value: %q", got)
	}
	r = mustRun(t, brokers, "", "acl", "list", "--subject", "orders-value", "--format", "json")
	var listing []ACLListing
	if err := json.Unmarshal([]byte(r.stdout), &listing); err != nil || len(listing) != 2 || listing[0].ResourceType != "SUBJECT" {
		t.Fatalf("list --format json: %v\n%s", err, r.stdout)
	}

	r = mustRun(t, brokers, "", "acl", "delete", "--subject", "orders-", "--resource-pattern-type", "prefixed")
	if got := rows(r.stdout); len(got) != 2 || strings.Join(got[1], " ") != all[2] {
		t.Fatalf("delete printed:\n%s", r.stdout)
	}
	// Independently: the agent holds what is left.
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = acl.ResourceTypeSubject, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil || resp.ErrorCode != 0 || len(resp.Resources) != 1 || resp.Resources[0].ResourceName != "orders-value" || len(resp.Resources[0].ACLs) != 2 {
		t.Fatalf("DescribeAcls of SUBJECT after the delete: %+v, %v", resp, err)
	}
	if got := list(); !slices.Equal(got, []string{all[0], all[1], all[3]}) {
		t.Fatalf("list after delete: %q", got)
	}
}

// TestACLRelations creates, lists and deletes RELATION ACLs (the SQL
// catalog's) through `strand acl --relation` against an agent, and
// reads them back with a raw DescribeAcls as an independent check.
func TestACLRelations(t *testing.T) {
	a, err := agent.Start(t.Context(), agent.Config{DataDir: t.TempDir(), KafkaListen: "127.0.0.1:0", SnapshotInterval: agent.SnapshotsOff},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("agent.Start: %v", err)
	}
	t.Cleanup(func() { a.Stop(t.Context()) })
	brokers := a.KafkaAddr()
	r := mustRun(t, brokers, "", "acl", "create", "--allow-principal", "User:alice", "--operation", "create",
		"--operation", "read", "--relation", "alice_", "--resource-pattern-type", "prefixed")
	if got := rows(r.stdout); len(got) != 3 || strings.Join(got[1], " ") != "User:alice * RELATION alice_ PREFIXED CREATE ALLOW OK" {
		t.Fatalf("create printed:\n%s", r.stdout)
	}
	r = mustRun(t, brokers, "", "acl", "list", "--relation", "alice_totals", "--resource-pattern-type", "match")
	if got := rows(r.stdout); len(got) != 3 || strings.Join(got[2], " ") != "User:alice * RELATION alice_ PREFIXED READ ALLOW" {
		t.Fatalf("list printed:\n%s", r.stdout)
	}
	mustRun(t, brokers, "", "acl", "delete", "--relation", "alice_", "--resource-pattern-type", "prefixed", "--operation", "create")
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = acl.ResourceTypeRelation, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil || resp.ErrorCode != 0 || len(resp.Resources) != 1 || len(resp.Resources[0].ACLs) != 1 ||
		resp.Resources[0].ACLs[0].Operation != kmsg.ACLOperationRead {
		t.Fatalf("DescribeAcls of RELATION after the delete: %+v, %v", resp, err)
	}
}

// TestACLConnectors creates, lists and deletes CONNECTOR ACLs (the
// Connect API's) through `strand acl --connector` against an agent.
func TestACLConnectors(t *testing.T) {
	a, err := agent.Start(t.Context(), agent.Config{DataDir: t.TempDir(), KafkaListen: "127.0.0.1:0", SnapshotInterval: agent.SnapshotsOff},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("agent.Start: %v", err)
	}
	t.Cleanup(func() { a.Stop(t.Context()) })
	brokers := a.KafkaAddr()
	r := mustRun(t, brokers, "", "acl", "create", "--allow-principal", "User:alice", "--operation", "alter", "--connector", "pg-source")
	if got := rows(r.stdout); len(got) != 2 || strings.Join(got[1], " ") != "User:alice * CONNECTOR pg-source LITERAL ALTER ALLOW OK" {
		t.Fatalf("create printed:\n%s", r.stdout)
	}
	r = mustRun(t, brokers, "", "acl", "list", "--connector", "pg-source")
	if got := rows(r.stdout); len(got) != 2 || strings.Join(got[1], " ") != "User:alice * CONNECTOR pg-source LITERAL ALTER ALLOW" {
		t.Fatalf("list printed:\n%s", r.stdout)
	}
	mustRun(t, brokers, "", "acl", "delete", "--connector", "pg-source")
	r = mustRun(t, brokers, "", "acl", "list", "--connector", "pg-source")
	if got := rows(r.stdout); len(got) != 1 {
		t.Fatalf("list after delete printed:\n%s", r.stdout)
	}
}
