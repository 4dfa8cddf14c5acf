// Package acl owns access control lists and the decision they make: a
// Binding (resource pattern plus who, from where, what, allow or deny),
// the Filter CreateAcls' siblings DescribeAcls and DeleteAcls select
// bindings with, and the Authorizer, which answers "may this principal
// do this operation on this resource" with the semantics of Kafka's
// StandardAuthorizer:
//
//   - super users may do anything;
//   - the ACLs that apply to a resource are its literal ones, the literal
//     wildcard "*" of its type and every prefixed one whose prefix starts
//     its name;
//   - of those, an ACL matches when its principal is the client's or
//     User:*, its host is "*" or the client's address, and its operation
//     is the one asked, All, or (for allow only) one that implies it:
//     Read, Write, Delete and Alter imply Describe, AlterConfigs implies
//     DescribeConfigs;
//   - a matching deny wins over any allow; else a matching allow allows;
//     else, when no ACL at all applies to the resource, the answer is
//     allow.everyone.if.no.acl.found (default false); else deny.
//
// # Subjects: a Strand extension
//
// Kafka's resource types have no schema registry subject, so Strand adds
// one, ResourceTypeSubject (64, far above Kafka's enum so a future Kafka
// type cannot take its number), which CreateAcls, DescribeAcls and
// DeleteAcls carry like any other type from strand.metadata.version 6
// (apply refuses it below, as it always did). The schema registry each
// agent serves (package agent, registry.go) asks of a caller:
//
//   - READ on the subject to read its versions, schemas, config, mode,
//     to look a schema up under it or to test compatibility against it
//     (Confluent's Subject:Read); GET /subjects lists only the subjects
//     the caller may READ, as Kafka's Metadata lists only the topics it
//     may describe, and GET /schemas/ids/{id} needs READ on some subject
//     holding the id;
//   - WRITE on the subject to register a schema under it;
//   - DELETE on the subject to delete it or one of its versions;
//   - ALTER on the subject to change its compatibility level or mode;
//   - ALTER on the cluster to change the global level or mode.
//
// The implications hold as for Kafka's types (READ, WRITE, DELETE and
// ALTER imply DESCRIBE), and literal, prefixed and "*" patterns apply
// alike.
//
// # Relations: a Strand extension
//
// The SQL endpoint's relations (sources, materialized views, sinks, one
// namespace) are ResourceTypeRelation (65), carried like SUBJECT from
// strand.metadata.version 7. A session's principal is its SQL user,
// User:<name>, the same principal the user's SASL login has, so one set
// of ACLs rules both ports. The endpoint (package sql/catalog) asks, as
// Kafka's CreateTopics, DeleteTopics and Metadata ask of topics:
//
//   - CREATE on the cluster or on the relation's name to create a
//     source, a materialized view or a sink (either is enough, as for
//     CreateTopics);
//   - READ on the topic to create a source over it (nobody reads a topic
//     through SQL who could not consume it), WRITE on the topic to
//     create a sink into it;
//   - READ on every relation a view's or sink's query reads (nobody
//     exposes through a view what they could not read);
//   - READ on a relation to SELECT from it or SUBSCRIBE to it;
//   - DELETE on a relation to drop it, as DeleteTopics asks DELETE on a
//     topic. DROP ... CASCADE asks it of the relations named, not of
//     their dependents, as PostgreSQL asks ownership of the named
//     objects only;
//   - DESCRIBE (or anything implying it) on a relation to see it listed
//     by SHOW SOURCES, SHOW MATERIALIZED VIEWS or SHOW SINKS, as
//     Metadata lists only the topics a client may describe.
//
// A relation's owner (recorded at creation) gets no implicit rights,
// as a topic's creator gets none in Kafka.
//
// # Connectors: a Strand extension
//
// The connectors of Kafka Connect's REST API that every agent serves
// (package connect) are ResourceTypeConnector (66), carried like
// SUBJECT from strand.metadata.version 8. The API asks, as Kafka's
// CreateTopics, DeleteTopics and Metadata ask of topics:
//
//   - CREATE on the cluster or on the connector's name to create one
//     (POST /connectors, or PUT /connectors/{name}/config of a name
//     that does not exist);
//   - DESCRIBE (or anything implying it: READ, ALTER, DELETE) on the
//     connector to see it: GET /connectors lists only the connectors
//     the caller may describe, and its config, status and tasks need
//     it;
//   - ALTER on the connector to change its config, pause, resume or
//     restart it;
//   - DELETE on the connector to delete it.
//
// Validating a config against a class (PUT
// /connector-plugins/{class}/config/validate) and listing the classes
// need only an authenticated caller: they touch no connector.
//
// The package is pure: no I/O, no clock, no locks. The ACLs themselves
// live in the replicated metadata database (package meta), and the Kafka
// server builds an Authorizer from its copy.
package acl

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/auth"
)

// Kafka's names for the wildcards.
const (
	// Wildcard is the literal resource name that matches every resource
	// of its type, and the host that matches every address.
	Wildcard = "*"
	// WildcardPrincipal matches every principal.
	WildcardPrincipal = "User:*"
	// ClusterName is the one name a cluster resource has.
	ClusterName = "kafka-cluster"
)

// The wire's enums, under shorter names.
type (
	ResourceType = kmsg.ACLResourceType
	PatternType  = kmsg.ACLResourcePatternType
	Operation    = kmsg.ACLOperation
	Permission   = kmsg.ACLPermissionType
)

// ResourceTypeSubject is a schema registry subject (see the package
// doc): Strand's, not Kafka's.
const ResourceTypeSubject ResourceType = 64

// ResourceTypeRelation is a SQL relation: a source, a materialized view
// or a sink (see the package doc). Strand's, not Kafka's.
const ResourceTypeRelation ResourceType = 65

// ResourceTypeConnector is a connector of the Connect REST API (see the
// package doc). Strand's, not Kafka's.
const ResourceTypeConnector ResourceType = 66

// ResourceTypeName names t as kafka-acls.sh does, SUBJECT, RELATION and
// CONNECTOR for Strand's types (kmsg's String knows only Kafka's types).
func ResourceTypeName(t ResourceType) string {
	switch t {
	case ResourceTypeSubject:
		return "SUBJECT"
	case ResourceTypeRelation:
		return "RELATION"
	case ResourceTypeConnector:
		return "CONNECTOR"
	}
	return t.String()
}

// knownType reports whether t names one kind of resource: Kafka's
// TOPIC to USER, or one of Strand's.
func knownType(t ResourceType) bool {
	return t > kmsg.ACLResourceTypeAny && t <= kmsg.ACLResourceTypeUser || t == ResourceTypeSubject || t == ResourceTypeRelation || t == ResourceTypeConnector
}

// Binding is one ACL: Kafka's AclBinding.
type Binding struct {
	ResourceType ResourceType
	ResourceName string
	// PatternType is Literal or Prefixed.
	PatternType PatternType
	// Principal is "Type:Name"; User:* is every principal.
	Principal string
	// Host is "*" or one client address.
	Host       string
	Operation  Operation
	Permission Permission
}

// String formats b as kafka-acls.sh lists one.
func (b Binding) String() string {
	return fmt.Sprintf("(%s:%v:%s, %s from %s %v %v)", ResourceTypeName(b.ResourceType), b.PatternType, b.ResourceName,
		b.Principal, b.Host, b.Permission, b.Operation)
}

// Validate reports why b cannot be created, with Kafka's messages
// (AclControlManager.validateNewAcl and the CreateAcls handler); nil if
// it can. Every such error is INVALID_REQUEST on the wire. A subject
// or a relation is valid here; apply refuses a subject below
// strand.metadata.version 6, a relation below 7.
func (b Binding) Validate() error {
	switch {
	case !knownType(b.ResourceType):
		return fmt.Errorf("invalid resource type %v", b.ResourceType)
	case b.PatternType != kmsg.ACLResourcePatternTypeLiteral && b.PatternType != kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("invalid pattern type %v", b.PatternType)
	case b.Operation <= kmsg.ACLOperationAny || b.Operation > kmsg.ACLOperationDescribeTokens:
		return fmt.Errorf("invalid operation %v", b.Operation)
	case b.Permission != kmsg.ACLPermissionTypeAllow && b.Permission != kmsg.ACLPermissionTypeDeny:
		return fmt.Errorf("invalid permission type %v", b.Permission)
	case b.ResourceName == "":
		return fmt.Errorf("resource name should not be empty")
	case b.ResourceType == kmsg.ACLResourceTypeCluster && b.ResourceName != ClusterName:
		return fmt.Errorf("the only valid name for the CLUSTER resource is %s", ClusterName)
	case b.Host == "":
		return fmt.Errorf("host should not be empty")
	}
	if _, err := auth.ParsePrincipal(b.Principal); err != nil {
		return fmt.Errorf("could not parse principal from %q (no colon is present separating the principal type from the principal name)", b.Principal)
	}
	return nil
}

// Filter selects bindings (Kafka's AclBindingFilter): a nil string
// matches any value, the Any enum values match any value, and pattern
// type Match matches every pattern that applies to the named resource.
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Validate reports why f is not a usable filter (an unknown enum value),
// nil if it is. On the wire that is INVALID_REQUEST. A subject is
// valid here; apply refuses it below strand.metadata.version 6.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType != kmsg.ACLResourceTypeAny && !knownType(f.ResourceType):
		return fmt.Errorf("unknown resource type %v in filter", f.ResourceType)
	case f.PatternType <= kmsg.ACLResourcePatternTypeUnknown || f.PatternType > kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("unknown pattern type %v in filter", f.PatternType)
	case f.Operation <= kmsg.ACLOperationUnknown || f.Operation > kmsg.ACLOperationDescribeTokens:
		return fmt.Errorf("unknown operation %v in filter", f.Operation)
	case f.Permission <= kmsg.ACLPermissionTypeUnknown || f.Permission > kmsg.ACLPermissionTypeAllow:
		return fmt.Errorf("unknown permission type %v in filter", f.Permission)
	}
	return nil
}

// Matches reports whether f selects b (Kafka's AclBindingFilter.matches).
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny:
		if f.ResourceName != nil && *f.ResourceName != b.ResourceName {
			return false
		}
	case kmsg.ACLResourcePatternTypeMatch:
		if f.ResourceName != nil && !patternApplies(b, *f.ResourceName) {
			return false
		}
	default:
		if f.PatternType != b.PatternType || f.ResourceName != nil && *f.ResourceName != b.ResourceName {
			return false
		}
	}
	switch {
	case f.Principal != nil && *f.Principal != b.Principal,
		f.Host != nil && *f.Host != b.Host,
		f.Operation != kmsg.ACLOperationAny && f.Operation != b.Operation,
		f.Permission != kmsg.ACLPermissionTypeAny && f.Permission != b.Permission:
		return false
	}
	return true
}

// patternApplies reports whether b's pattern covers resource name: equal
// or "*" for a literal pattern, a prefix of it for a prefixed one.
func patternApplies(b Binding, name string) bool {
	if b.PatternType == kmsg.ACLResourcePatternTypePrefixed {
		return strings.HasPrefix(name, b.ResourceName)
	}
	return b.ResourceName == name || b.ResourceName == Wildcard
}

// Config is the authorizer's static configuration.
type Config struct {
	// SuperUsers may do anything (super.users).
	SuperUsers []auth.Principal
	// AllowIfNoACL allows an operation on a resource no ACL applies to
	// (allow.everyone.if.no.acl.found).
	AllowIfNoACL bool
}

// ParseSuperUsers parses Kafka's super.users: principals separated by
// ';' ("User:admin;User:bob"), blanks ignored.
func ParseSuperUsers(s string) ([]auth.Principal, error) {
	var ps []auth.Principal
	for _, f := range strings.Split(s, ";") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := auth.ParsePrincipal(f)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// Authorizer decides requests against one set of ACLs. It is immutable,
// so safe for concurrent use; a changed set is a new Authorizer.
type Authorizer struct {
	cfg   Config
	super map[string]bool
	// literal and prefixed hold the bindings of each pattern type by
	// resource type and name ("*" included in literal); prefixLens
	// holds the distinct lengths of the prefixed names by resource type,
	// ascending, so a check looks up only the prefixes a name can have.
	literal    map[ResourceType]map[string][]Binding
	prefixed   map[ResourceType]map[string][]Binding
	prefixLens map[ResourceType][]int
}

// New returns an authorizer over bindings.
func New(cfg Config, bindings []Binding) *Authorizer {
	a := &Authorizer{
		cfg:        cfg,
		super:      make(map[string]bool, len(cfg.SuperUsers)),
		literal:    make(map[ResourceType]map[string][]Binding),
		prefixed:   make(map[ResourceType]map[string][]Binding),
		prefixLens: make(map[ResourceType][]int),
	}
	for _, p := range cfg.SuperUsers {
		a.super[p.String()] = true
	}
	add := func(byType map[ResourceType]map[string][]Binding, b Binding) {
		m := byType[b.ResourceType]
		if m == nil {
			m = make(map[string][]Binding)
			byType[b.ResourceType] = m
		}
		m[b.ResourceName] = append(m[b.ResourceName], b)
	}
	for _, b := range bindings {
		if b.PatternType != kmsg.ACLResourcePatternTypePrefixed {
			add(a.literal, b)
			continue
		}
		add(a.prefixed, b)
		if lens := a.prefixLens[b.ResourceType]; !slices.Contains(lens, len(b.ResourceName)) {
			a.prefixLens[b.ResourceType] = append(lens, len(b.ResourceName))
		}
	}
	for _, lens := range a.prefixLens {
		slices.Sort(lens)
	}
	return a
}

// Request is who asks: the principal and the client's address as
// netip.Addr.String formats it ("" when unknown, which only "*" hosts
// match). ACL hosts are stored in the same form (the Kafka layer
// canonicalizes them at CreateAcls), so comparing strings is comparing
// addresses, as Kafka compares them.
type Request struct {
	Principal auth.Principal
	Host      string
}

// SuperUser reports whether p is one of the super users, who may do
// anything. The agent's web console runs every Kafka request as a super
// user, so only a super user may use it.
func (a *Authorizer) SuperUser(p auth.Principal) bool { return a.super[p.String()] }

// Authorize reports whether r may do op on the resource (typ, name).
func (a *Authorizer) Authorize(r Request, op Operation, typ ResourceType, name string) bool {
	principal := r.Principal.String()
	if a.super[principal] {
		return true
	}
	applies, allowed := false, false
	check := func(bs []Binding) (denied bool) {
		for _, b := range bs {
			applies = true
			switch matchResult(b, principal, r.Host, op) {
			case kmsg.ACLPermissionTypeDeny:
				return true
			case kmsg.ACLPermissionTypeAllow:
				allowed = true
			}
		}
		return false
	}
	lit := a.literal[typ]
	if check(lit[name]) {
		return false
	}
	if name != Wildcard && check(lit[Wildcard]) {
		return false
	}
	pre := a.prefixed[typ]
	for _, n := range a.prefixLens[typ] {
		if n > len(name) {
			break
		}
		if check(pre[name[:n]]) {
			return false
		}
	}
	if allowed {
		return true
	}
	return !applies && a.cfg.AllowIfNoACL
}

// matchResult is b's verdict on (principal, host, op): Allow, Deny, or
// Unknown when b does not match (StandardAuthorizerData.findResult).
func matchResult(b Binding, principal, host string, op Operation) Permission {
	if b.Principal != principal && b.Principal != WildcardPrincipal {
		return kmsg.ACLPermissionTypeUnknown
	}
	if !hostMatches(b.Host, host) {
		return kmsg.ACLPermissionTypeUnknown
	}
	if b.Operation != kmsg.ACLOperationAll && b.Operation != op {
		// Implications hold for allow only: denying Read does not deny
		// Describe.
		if b.Permission != kmsg.ACLPermissionTypeAllow || !implies(b.Operation, op) {
			return kmsg.ACLPermissionTypeUnknown
		}
	}
	return b.Permission
}

// implies reports whether allowing have allows want too.
func implies(have, want Operation) bool {
	switch want {
	case kmsg.ACLOperationDescribe:
		switch have {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case kmsg.ACLOperationDescribeConfigs:
		return have == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// hostMatches reports whether an ACL's host covers the client's.
func hostMatches(aclHost, client string) bool {
	return aclHost == Wildcard || (client != "" && aclHost == client)
}

// AuthorizeAny reports whether r may do op on some resource of type typ
// (Kafka's Authorizer.authorizeByResourceType, which InitProducerId uses
// for idempotent producers): a super user, an allow of op (or All) on a
// literal or prefixed pattern that no deny of the same principal and host
// covers, or no ACL of the type at all with allow.everyone.if.no.acl.found.
func (a *Authorizer) AuthorizeAny(r Request, op Operation, typ ResourceType) bool {
	principal := r.Principal.String()
	if a.super[principal] {
		return true
	}
	var denyLit, denyPre, allowLit, allowPre []string
	found := false
	visit := func(b Binding) {
		found = true
		if (b.Principal != principal && b.Principal != WildcardPrincipal) || !hostMatches(b.Host, r.Host) ||
			(b.Operation != op && b.Operation != kmsg.ACLOperationAll) {
			return
		}
		pre := b.PatternType == kmsg.ACLResourcePatternTypePrefixed
		switch {
		case b.Permission == kmsg.ACLPermissionTypeDeny && pre:
			denyPre = append(denyPre, b.ResourceName)
		case b.Permission == kmsg.ACLPermissionTypeDeny:
			denyLit = append(denyLit, b.ResourceName)
		case pre:
			allowPre = append(allowPre, b.ResourceName)
		default:
			allowLit = append(allowLit, b.ResourceName)
		}
	}
	for _, bs := range a.literal[typ] {
		for _, b := range bs {
			visit(b)
		}
	}
	for _, bs := range a.prefixed[typ] {
		for _, b := range bs {
			visit(b)
		}
	}
	if !found {
		return a.cfg.AllowIfNoACL
	}
	deniedPrefix := func(name string) bool {
		for _, p := range denyPre {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
	for _, l := range denyLit {
		if l == Wildcard {
			return false
		}
	}
	for _, name := range allowPre {
		if !deniedPrefix(name) {
			return true
		}
	}
	for _, name := range allowLit {
		denied := deniedPrefix(name)
		for _, l := range denyLit {
			denied = denied || l == name
		}
		if !denied {
			return true
		}
	}
	return false
}

// Operations a Metadata or DescribeCluster answer reports as authorized,
// per resource type, as Kafka's AclEntry.supportedOperations lists them.
var (
	TopicOperations = []Operation{kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate,
		kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs}
	GroupOperations   = []Operation{kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete}
	ClusterOperations = []Operation{kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite,
		kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe}
)

// AuthorizedOperations is the bit field of ops r may do on the resource
// (bit n set for operation n), as Metadata's authorized_operations
// fields carry it.
func (a *Authorizer) AuthorizedOperations(r Request, typ ResourceType, name string, ops []Operation) int32 {
	var bits int32
	for _, op := range ops {
		if a.Authorize(r, op, typ, name) {
			bits |= 1 << op
		}
	}
	return bits
}
