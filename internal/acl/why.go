package acl

import "github.com/twmb/franz-go/pkg/kmsg"

// Why says what decided Authorize(r, op, typ, name), in the words of
// Kafka's authorizer log ("based on rule ..."): the deny ACL that
// matched, or the absence of an allow. The authorization log
// (package authzlog) asks it for the denials it writes, so an operator
// reads which ACL to change rather than finding it by trial. It walks
// the same bindings as Authorize and is only asked after a denial.
func (a *Authorizer) Why(r Request, op Operation, typ ResourceType, name string) string {
	principal := r.Principal.String()
	if a.super[principal] {
		return "super user"
	}
	var deny, allow *Binding
	applies := false
	visit := func(bs []Binding) {
		for i := range bs {
			applies = true
			switch matchResult(bs[i], principal, r.Host, op) {
			case kmsg.ACLPermissionTypeDeny:
				if deny == nil {
					deny = &bs[i]
				}
			case kmsg.ACLPermissionTypeAllow:
				if allow == nil {
					allow = &bs[i]
				}
			}
		}
	}
	lit := a.literal[typ]
	visit(lit[name])
	if name != Wildcard {
		visit(lit[Wildcard])
	}
	pre := a.prefixed[typ]
	for _, n := range a.prefixLens[typ] {
		if n > len(name) {
			break
		}
		visit(pre[name[:n]])
	}
	switch {
	case deny != nil:
		return "denied by ACL " + deny.String()
	case allow != nil:
		return "allowed by ACL " + allow.String()
	case applies:
		return "no ACL allows it (ACLs on the resource name other principals, hosts or operations)"
	case a.cfg.AllowIfNoACL:
		return "no ACL applies to the resource and allow.everyone.if.no.acl.found is true"
	}
	return "no ACL applies to the resource and allow.everyone.if.no.acl.found is false"
}
