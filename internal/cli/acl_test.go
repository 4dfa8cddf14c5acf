package cli

import (
	"errors"
	"slices"
	"strings"
	"testing"
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
