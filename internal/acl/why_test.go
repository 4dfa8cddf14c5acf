package acl

import (
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/auth"
)

func TestWhy(t *testing.T) {
	alice := Request{Principal: auth.User("alice"), Host: "10.0.0.1"}
	bob := Request{Principal: auth.User("bob"), Host: "10.0.0.2"}
	a := New(Config{SuperUsers: []auth.Principal{auth.User("root")}}, []Binding{
		bind(topic, "orders", lit, "User:alice", "*", read, allow),
		bind(topic, "logs-", pre, "User:bob", "*", all, deny),
		bind(topic, "logs-", pre, "User:bob", "*", read, allow),
	})
	for _, tc := range []struct {
		name string
		r    Request
		typ  ResourceType
		res  string
		want string
	}{
		{"prefixed deny names its pattern", bob, topic, "logs-app", "denied by ACL (TOPIC:PREFIXED:logs-, User:bob from * DENY ALL)"},
		{"acls for others", bob, topic, "orders", "no ACL allows it"},
		{"no acl", alice, group, "g", "allow.everyone.if.no.acl.found is false"},
		{"allowed", alice, topic, "orders", "allowed by ACL"},
		{"super user", Request{Principal: auth.User("root")}, topic, "x", "super user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := a.Why(tc.r, read, tc.typ, tc.res); !strings.Contains(got, tc.want) {
				t.Errorf("Why = %q, want it to contain %q", got, tc.want)
			}
			// Why must agree with Authorize about the verdict.
			allowed := a.Authorize(tc.r, read, tc.typ, tc.res)
			if got := a.Why(tc.r, read, tc.typ, tc.res); allowed != (strings.HasPrefix(got, "allowed") || got == "super user") {
				t.Errorf("Authorize = %v but Why = %q", allowed, got)
			}
		})
	}
}
