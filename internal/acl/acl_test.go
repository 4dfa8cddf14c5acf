package acl

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/auth"
)

const (
	topic   = kmsg.ACLResourceTypeTopic
	group   = kmsg.ACLResourceTypeGroup
	cluster = kmsg.ACLResourceTypeCluster
	lit     = kmsg.ACLResourcePatternTypeLiteral
	pre     = kmsg.ACLResourcePatternTypePrefixed
	allow   = kmsg.ACLPermissionTypeAllow
	deny    = kmsg.ACLPermissionTypeDeny
	read    = kmsg.ACLOperationRead
	write   = kmsg.ACLOperationWrite
	desc    = kmsg.ACLOperationDescribe
	all     = kmsg.ACLOperationAll
)

func bind(typ ResourceType, name string, pt PatternType, principal, host string, op Operation, perm Permission) Binding {
	return Binding{ResourceType: typ, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

func TestAuthorize(t *testing.T) {
	alice := Request{Principal: auth.User("alice"), Host: "10.0.0.1"}
	bob := Request{Principal: auth.User("bob"), Host: "10.0.0.2"}
	root := Request{Principal: auth.User("root"), Host: "10.0.0.3"}
	a := New(Config{SuperUsers: []auth.Principal{auth.User("root")}}, []Binding{
		bind(topic, "orders", lit, "User:alice", "*", read, allow),
		bind(topic, "orders", lit, "User:bob", "*", write, allow),
		bind(topic, "orders", lit, "User:bob", "*", read, deny),
		bind(topic, "logs-", pre, "User:*", "*", write, allow),
		bind(topic, "logs-secret", lit, "User:bob", "*", all, deny),
		bind(topic, "*", lit, "User:alice", "10.0.0.1", desc, allow),
		bind(group, "g", lit, "User:alice", "10.9.9.9", read, allow),
		bind(cluster, ClusterName, lit, "User:bob", "*", kmsg.ACLOperationAlterConfigs, allow),
	})
	cases := []struct {
		name string
		r    Request
		op   Operation
		typ  ResourceType
		res  string
		want bool
	}{
		{"literal allow", alice, read, topic, "orders", true},
		{"other op", alice, write, topic, "orders", false},
		{"read implies describe", alice, desc, topic, "orders", true},
		{"deny beats allow of another op's implication", bob, desc, topic, "orders", true},
		{"deny beats allow", bob, read, topic, "orders", false},
		{"prefixed, wildcard principal", alice, write, topic, "logs-app", true},
		{"prefix does not match", alice, write, topic, "log", false},
		{"deny All beats prefixed allow", bob, write, topic, "logs-secret", false},
		{"wildcard resource, host matches", alice, desc, topic, "anything", true},
		{"wildcard resource, host differs", Request{Principal: auth.User("alice"), Host: "10.0.0.9"}, desc, topic, "anything", false},
		{"host filter", alice, read, group, "g", false},
		{"no acl, default deny", alice, read, group, "other", false},
		{"alter configs implies describe configs", bob, kmsg.ACLOperationDescribeConfigs, cluster, ClusterName, true},
		{"alter configs does not imply describe", bob, desc, cluster, ClusterName, false},
		{"super user", root, kmsg.ACLOperationDelete, topic, "orders", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := a.Authorize(c.r, c.op, c.typ, c.res); got != c.want {
				t.Errorf("Authorize(%v, %v, %v, %q) = %v, want %v", c.r.Principal, c.op, c.typ, c.res, got, c.want)
			}
		})
	}

	// allow.everyone.if.no.acl.found allows only where no ACL applies.
	open := New(Config{AllowIfNoACL: true}, []Binding{bind(topic, "orders", lit, "User:alice", "*", read, allow)})
	if !open.Authorize(bob, write, topic, "free") {
		t.Error("no ACL on the resource: allow.everyone.if.no.acl.found should allow")
	}
	if open.Authorize(bob, read, topic, "orders") {
		t.Error("an ACL applies to the resource: bob must be denied")
	}
	if bits := a.AuthorizedOperations(alice, topic, "orders", TopicOperations); bits != 1<<read|1<<desc {
		t.Errorf("AuthorizedOperations = %b", bits)
	}
}

func TestAuthorizeAny(t *testing.T) {
	alice := Request{Principal: auth.User("alice")}
	cases := []struct {
		name string
		acls []Binding
		want bool
	}{
		{"none", nil, false},
		{"literal allow", []Binding{bind(topic, "t", lit, "User:alice", "*", write, allow)}, true},
		{"literal allow denied", []Binding{bind(topic, "t", lit, "User:alice", "*", write, allow), bind(topic, "t", lit, "User:alice", "*", write, deny)}, false},
		{"prefix allow, shorter prefix denied", []Binding{bind(topic, "ab", pre, "User:alice", "*", write, allow), bind(topic, "a", pre, "User:alice", "*", write, deny)}, false},
		{"prefix allow, wildcard deny", []Binding{bind(topic, "ab", pre, "User:alice", "*", write, allow), bind(topic, "*", lit, "User:*", "*", all, deny)}, false},
		{"other op", []Binding{bind(topic, "t", lit, "User:alice", "*", read, allow)}, false},
	}
	for _, c := range cases {
		if got := New(Config{}, c.acls).AuthorizeAny(alice, write, topic); got != c.want {
			t.Errorf("%s: AuthorizeAny = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFilter(t *testing.T) {
	b := bind(topic, "logs-", pre, "User:alice", "*", write, allow)
	s := func(v string) *string { return &v }
	anyF := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	cases := []struct {
		name string
		edit func(*Filter)
		want bool
	}{
		{"any", func(*Filter) {}, true},
		{"match covers prefix", func(f *Filter) { f.PatternType, f.ResourceName = kmsg.ACLResourcePatternTypeMatch, s("logs-app") }, true},
		{"match not covered", func(f *Filter) { f.PatternType, f.ResourceName = kmsg.ACLResourcePatternTypeMatch, s("log") }, false},
		{"literal type differs", func(f *Filter) { f.PatternType = lit }, false},
		{"any pattern, exact name", func(f *Filter) { f.ResourceName = s("logs-") }, true},
		{"principal differs", func(f *Filter) { f.Principal = s("User:bob") }, false},
		{"host", func(f *Filter) { f.Host = s("*") }, true},
		{"op differs", func(f *Filter) { f.Operation = read }, false},
		{"permission differs", func(f *Filter) { f.Permission = deny }, false},
		{"type differs", func(f *Filter) { f.ResourceType = group }, false},
	}
	for _, c := range cases {
		f := anyF
		c.edit(&f)
		if got := f.Matches(b); got != c.want {
			t.Errorf("%s: Matches = %v, want %v", c.name, got, c.want)
		}
	}
	if err := (Filter{}).Validate(); err == nil {
		t.Error("an all-unknown filter validated")
	}
	for _, bad := range []Binding{
		bind(kmsg.ACLResourceTypeAny, "t", lit, "User:a", "*", read, allow),
		bind(topic, "t", kmsg.ACLResourcePatternTypeMatch, "User:a", "*", read, allow),
		bind(topic, "t", lit, "User:a", "*", kmsg.ACLOperationAny, allow),
		bind(topic, "t", lit, "User:a", "*", read, kmsg.ACLPermissionTypeAny),
		bind(topic, "", lit, "User:a", "*", read, allow),
		bind(cluster, "c", lit, "User:a", "*", read, allow),
		bind(topic, "t", lit, "alice", "*", read, allow),
	} {
		if bad.Validate() == nil {
			t.Errorf("%v validated", bad)
		}
	}
	if err := b.Validate(); err != nil {
		t.Errorf("%v: %v", b, err)
	}
}

func TestParseSuperUsers(t *testing.T) {
	ps, err := ParseSuperUsers("User:admin; User:bob;")
	if err != nil || len(ps) != 2 || ps[0] != auth.User("admin") || ps[1] != auth.User("bob") {
		t.Fatalf("ParseSuperUsers = %v, %v", ps, err)
	}
	if _, err := ParseSuperUsers("admin"); err == nil {
		t.Error("a principal without a type parsed")
	}
}

// BenchmarkAuthorize: one check against 10,000 literal and 100 prefixed
// ACLs, the per-topic cost of a Metadata answer with ACLs on.
func BenchmarkAuthorize(b *testing.B) {
	var bs []Binding
	for i := range 10_000 {
		bs = append(bs, bind(topic, fmt.Sprintf("topic-%d", i), lit, fmt.Sprintf("User:u%d", i%50), "*", read, allow))
	}
	for i := range 100 {
		bs = append(bs, bind(topic, fmt.Sprintf("pre-%d-", i), pre, "User:u1", "*", write, allow))
	}
	a := New(Config{}, bs)
	r := Request{Principal: auth.User("u1"), Host: "10.0.0.1"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		a.Authorize(r, desc, topic, fmt.Sprintf("topic-%d", i%10_000))
	}
}

// TestSubjects: the subject type validates as a binding and a filter,
// names itself SUBJECT, and is decided as Kafka's types are (prefixes,
// deny first, implications), apart from a topic of the same name.
func TestSubjects(t *testing.T) {
	subject := ResourceTypeSubject
	b := bind(subject, "orders-value", lit, "User:alice", "*", write, allow)
	if err := b.Validate(); err != nil {
		t.Fatalf("subject binding: %v", err)
	}
	if got, want := b.String(), "(SUBJECT:LITERAL:orders-value, User:alice from * ALLOW WRITE)"; got != want {
		t.Errorf("String = %s, want %s", got, want)
	}
	for _, bad := range []ResourceType{63, 67, -64} {
		if bind(bad, "x", lit, "User:a", "*", read, allow).Validate() == nil {
			t.Errorf("resource type %d validated", bad)
		}
		if (Filter{ResourceType: bad, PatternType: lit, Operation: read, Permission: allow}).Validate() == nil {
			t.Errorf("filter of resource type %d validated", bad)
		}
	}
	f := Filter{ResourceType: subject, PatternType: kmsg.ACLResourcePatternTypeMatch, ResourceName: kmsg.StringPtr("orders-value-x"),
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	if err := f.Validate(); err != nil {
		t.Fatalf("subject filter: %v", err)
	}
	a := New(Config{}, []Binding{
		b,
		bind(subject, "orders-", pre, "User:bob", "*", read, allow),
		bind(subject, "orders-secret", lit, "User:bob", "*", read, deny),
		bind(topic, "orders-value", lit, "User:carol", "*", all, allow),
	})
	alice, bob, carol := Request{Principal: auth.User("alice")}, Request{Principal: auth.User("bob")}, Request{Principal: auth.User("carol")}
	for _, c := range []struct {
		name string
		r    Request
		op   Operation
		res  string
		want bool
	}{
		{"literal write", alice, write, "orders-value", true},
		{"write implies describe", alice, desc, "orders-value", true},
		{"write is not read", alice, read, "orders-value", false},
		{"prefixed read", bob, read, "orders-key", true},
		{"deny beats prefixed allow", bob, read, "orders-secret", false},
		{"outside the prefix", bob, read, "payments-value", false},
		{"a topic's ACL is not the subject's", carol, read, "orders-value", false},
	} {
		if got := a.Authorize(c.r, c.op, subject, c.res); got != c.want {
			t.Errorf("%s: Authorize = %v, want %v", c.name, got, c.want)
		}
	}
	if !f.Matches(bind(subject, "orders-", pre, "User:bob", "*", read, allow)) || f.Matches(bind(topic, "orders-", pre, "User:bob", "*", read, allow)) {
		t.Error("a match filter on a subject selects by type and prefix")
	}
}

// TestRelations: the relation type (65) validates, names itself
// RELATION and is decided apart from the topic and subject of the same
// name, with the operations the SQL endpoint asks (package doc): CREATE
// on the name or the cluster, READ, DELETE, DESCRIBE implied.
func TestRelations(t *testing.T) {
	rel := ResourceTypeRelation
	create, del := kmsg.ACLOperationCreate, kmsg.ACLOperationDelete
	cluster := kmsg.ACLResourceTypeCluster
	b := bind(rel, "orders", lit, "User:alice", "*", read, allow)
	if err := b.Validate(); err != nil {
		t.Fatalf("relation binding: %v", err)
	}
	if got, want := b.String(), "(RELATION:LITERAL:orders, User:alice from * ALLOW READ)"; got != want {
		t.Errorf("String = %s, want %s", got, want)
	}
	a := New(Config{}, []Binding{
		b,
		bind(rel, "alice_", pre, "User:alice", "*", create, allow),
		bind(rel, "alice_", pre, "User:alice", "*", del, allow),
		bind(cluster, ClusterName, lit, "User:bob", "*", create, allow),
		bind(rel, "secret", lit, "User:bob", "*", read, deny),
		bind(rel, "*", lit, "User:bob", "*", read, allow),
		bind(topic, "orders", lit, "User:carol", "*", all, allow),
		bind(ResourceTypeSubject, "orders", lit, "User:carol", "*", all, allow),
	})
	alice, bob, carol := Request{Principal: auth.User("alice")}, Request{Principal: auth.User("bob")}, Request{Principal: auth.User("carol")}
	for _, c := range []struct {
		name string
		r    Request
		op   Operation
		typ  ResourceType
		res  string
		want bool
	}{
		{"literal read", alice, read, rel, "orders", true},
		{"read implies describe", alice, desc, rel, "orders", true},
		{"read is not delete", alice, del, rel, "orders", false},
		{"create under a prefix", alice, create, rel, "alice_totals", true},
		{"create outside the prefix", alice, create, rel, "totals", false},
		{"delete under a prefix", alice, del, rel, "alice_totals", true},
		{"create on the cluster", bob, create, cluster, ClusterName, true},
		{"the cluster's create is not the relation's", bob, create, rel, "totals", false},
		{"read by wildcard", bob, read, rel, "totals", true},
		{"deny beats the wildcard", bob, read, rel, "secret", false},
		{"a topic's or subject's ACL is not the relation's", carol, read, rel, "orders", false},
		{"nor the other way", alice, read, topic, "orders", false},
	} {
		if got := a.Authorize(c.r, c.op, c.typ, c.res); got != c.want {
			t.Errorf("%s: Authorize = %v, want %v", c.name, got, c.want)
		}
	}
	f := Filter{ResourceType: rel, PatternType: kmsg.ACLResourcePatternTypeMatch, ResourceName: kmsg.StringPtr("alice_x"),
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	if err := f.Validate(); err != nil {
		t.Fatalf("relation filter: %v", err)
	}
	if !f.Matches(bind(rel, "alice_", pre, "User:alice", "*", create, allow)) || f.Matches(bind(ResourceTypeSubject, "alice_", pre, "User:alice", "*", create, allow)) {
		t.Error("a match filter on a relation selects by type and prefix")
	}
}

// TestConnectors: the connector type (66) validates, names itself
// CONNECTOR and is decided apart from the topic and relation of the
// same name, with the operations the Connect API asks (package doc).
func TestConnectors(t *testing.T) {
	conn := ResourceTypeConnector
	alter, del := kmsg.ACLOperationAlter, kmsg.ACLOperationDelete
	b := bind(conn, "pg", lit, "User:alice", "*", alter, allow)
	if err := b.Validate(); err != nil {
		t.Fatalf("connector binding: %v", err)
	}
	if got, want := b.String(), "(CONNECTOR:LITERAL:pg, User:alice from * ALLOW ALTER)"; got != want {
		t.Errorf("String = %s, want %s", got, want)
	}
	a := New(Config{}, []Binding{b, bind(ResourceTypeRelation, "orders", lit, "User:bob", "*", all, allow)})
	alice, bob := Request{Principal: auth.User("alice")}, Request{Principal: auth.User("bob")}
	describe := kmsg.ACLOperationDescribe
	for _, c := range []struct {
		r    Request
		op   Operation
		name string
		want bool
	}{
		{alice, alter, "pg", true},
		{alice, describe, "pg", true}, // ALTER implies DESCRIBE
		{alice, del, "pg", false},
		{alice, alter, "other", false},
		{bob, describe, "orders", false}, // a relation's ACL is not the connector's
	} {
		if got := a.Authorize(c.r, c.op, conn, c.name); got != c.want {
			t.Errorf("%v %v CONNECTOR %s = %v, want %v", c.r.Principal, c.op, c.name, got, c.want)
		}
	}
}
