package console

// The users (SCRAM credentials), ACLs and client quotas pages: lists,
// and forms to create and delete where the Kafka API allows it
// (AlterUserSCRAMCredentials, CreateAcls/DeleteAcls,
// AlterClientQuotas). Like every console form they need the same origin
// and Config.Authorize's consent; the Kafka calls go through the
// console's client, as every console action's do.

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's bounds on SCRAM iterations (ScramMechanism.minIterations, and
// the broker's upper limit).
const (
	minScramIterations     = 4096
	maxScramIterations     = 16384
	defaultScramIterations = 8192
)

type userRow struct {
	User string
	// Mechanisms are "SCRAM-SHA-256 (8192 iterations)".
	Mechanisms []userMechanism
	Err        string
}

type userMechanism struct {
	Name       string
	Iterations int32
}

type usersData struct {
	Users []userRow
	Err   string
}

func (c *Console) handleUsers(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	var d usersData
	described, err := c.adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		d.Err = err.Error()
	}
	for _, u := range described.Sorted() {
		row := userRow{User: u.User}
		if u.Err != nil {
			row.Err = u.Err.Error() + detail(u.ErrMessage)
		}
		for _, ci := range u.CredInfos {
			row.Mechanisms = append(row.Mechanisms, userMechanism{Name: ci.Mechanism.String(), Iterations: ci.Iterations})
		}
		d.Users = append(d.Users, row)
	}
	c.render(w, r, http.StatusOK, "users", page{Title: "Users", Nav: "users", Data: d})
}

func parseMechanism(s string) (kadm.ScramMechanism, error) {
	switch s {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, fmt.Errorf("mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", s)
}

// handleUpsertUser creates a user's SCRAM credential for a mechanism, or
// replaces its password.
func (c *Console) handleUpsertUser(w http.ResponseWriter, r *http.Request) {
	user := strings.TrimSpace(r.PostFormValue("user"))
	password := r.PostFormValue("password")
	mech, err := parseMechanism(r.PostFormValue("mechanism"))
	if err == nil && (user == "" || password == "") {
		err = errors.New("a user name and a password are needed")
	}
	var iterations int64
	if err == nil {
		iterations, err = formInt(r, "iterations", defaultScramIterations, minScramIterations, maxScramIterations)
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	res, err := c.adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: mech, Iterations: int32(iterations), Password: password}})
	if err == nil {
		if u, ok := res[user]; ok && u.Err != nil {
			err = fmt.Errorf("%w%s", u.Err, detail(u.ErrMessage))
		}
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, fmt.Errorf("setting %s's %s password: %w", user, mech, err))
		return
	}
	done(w, r, Prefix+"users", fmt.Sprintf("user %s: %s password set", user, mech))
}

// handleDeleteUser deletes one of a user's SCRAM credentials.
func (c *Console) handleDeleteUser(w http.ResponseWriter, r *http.Request) {
	user := r.PostFormValue("user")
	mech, err := parseMechanism(r.PostFormValue("mechanism"))
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	res, err := c.adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: user, Mechanism: mech}}, nil)
	if err == nil {
		if u, ok := res[user]; ok && u.Err != nil {
			err = fmt.Errorf("%w%s", u.Err, detail(u.ErrMessage))
		}
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, fmt.Errorf("deleting %s's %s credential: %w", user, mech, err))
		return
	}
	done(w, r, Prefix+"users", fmt.Sprintf("user %s: %s credential deleted", user, mech))
}

// aclRow is one ACL binding, in Kafka's names (TOPIC, LITERAL, READ,
// ALLOW), which are also the delete form's fields.
type aclRow struct {
	ResourceType, ResourceName, PatternType string
	Principal, Host, Operation, Permission  string
}

type aclsData struct {
	ACLs []aclRow
	Err  string
}

func (c *Console) handleACLs(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	var d aclsData
	resp, err := req.RequestWith(ctx, c.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
		if err != nil && resp.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
		}
	}
	if err != nil {
		d.Err = err.Error()
	} else {
		for _, res := range resp.Resources {
			for _, a := range res.ACLs {
				d.ACLs = append(d.ACLs, aclRow{ResourceType: res.ResourceType.String(), ResourceName: res.ResourceName,
					PatternType: res.ResourcePatternType.String(), Principal: a.Principal, Host: a.Host,
					Operation: a.Operation.String(), Permission: a.PermissionType.String()})
			}
		}
	}
	slices.SortFunc(d.ACLs, func(a, b aclRow) int {
		return cmp.Or(strings.Compare(a.ResourceType, b.ResourceType), strings.Compare(a.ResourceName, b.ResourceName),
			strings.Compare(a.Principal, b.Principal), strings.Compare(a.Operation, b.Operation))
	})
	c.render(w, r, http.StatusOK, "acls", page{Title: "ACLs", Nav: "acls", Data: d})
}

// aclFromForm reads one exact binding: every field named, none ANY or
// MATCH, so a delete removes the row it was posted from and nothing else.
func aclFromForm(r *http.Request) (rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType,
	principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType, err error,
) {
	field := func(f string) string { return strings.TrimSpace(r.PostFormValue(f)) }
	if rt, err = kmsg.ParseACLResourceType(field("resource_type")); err != nil || rt <= kmsg.ACLResourceTypeAny {
		return 0, "", 0, "", "", 0, 0, fmt.Errorf("resource type %q: want TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN or USER", field("resource_type"))
	}
	if pt, err = kmsg.ParseACLResourcePatternType(cmp.Or(field("pattern_type"), "LITERAL")); err != nil ||
		(pt != kmsg.ACLResourcePatternTypeLiteral && pt != kmsg.ACLResourcePatternTypePrefixed) {
		return 0, "", 0, "", "", 0, 0, fmt.Errorf("pattern type %q: want LITERAL or PREFIXED", field("pattern_type"))
	}
	if op, err = kmsg.ParseACLOperation(field("operation")); err != nil || op <= kmsg.ACLOperationAny {
		return 0, "", 0, "", "", 0, 0, fmt.Errorf("operation %q: want ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, ...", field("operation"))
	}
	if perm, err = kmsg.ParseACLPermissionType(field("permission")); err != nil ||
		(perm != kmsg.ACLPermissionTypeAllow && perm != kmsg.ACLPermissionTypeDeny) {
		return 0, "", 0, "", "", 0, 0, fmt.Errorf("permission %q: want ALLOW or DENY", field("permission"))
	}
	name, principal, host = field("resource_name"), field("principal"), cmp.Or(field("host"), "*")
	if rt == kmsg.ACLResourceTypeCluster && name == "" {
		name = "kafka-cluster"
	}
	if name == "" || principal == "" {
		return 0, "", 0, "", "", 0, 0, errors.New("a resource name and a principal (User:alice) are needed")
	}
	return rt, name, pt, principal, host, op, perm, nil
}

func (c *Console) handleCreateACL(w http.ResponseWriter, r *http.Request) {
	rt, name, pt, principal, host, op, perm, err := aclFromForm(r)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	req := kmsg.NewPtrCreateACLsRequest()
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = rt, name, pt
	cr.Principal, cr.Host, cr.Operation, cr.PermissionType = principal, host, op, perm
	req.Creations = append(req.Creations, cr)
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.cl)
	if err == nil && len(resp.Results) != 1 {
		err = errors.New("the broker's answer has no result")
	}
	if err == nil {
		if err = kerr.ErrorForCode(resp.Results[0].ErrorCode); err != nil && resp.Results[0].ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *resp.Results[0].ErrorMessage)
		}
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, fmt.Errorf("creating the ACL: %w", err))
		return
	}
	done(w, r, Prefix+"acls", fmt.Sprintf("ACL created: %s %s %s on %s %s", principal, perm, op, rt, name))
}

func (c *Console) handleDeleteACL(w http.ResponseWriter, r *http.Request) {
	rt, name, pt, principal, host, op, perm, err := aclFromForm(r)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = rt, &name, pt
	f.Principal, f.Host, f.Operation, f.PermissionType = &principal, &host, op, perm
	req.Filters = append(req.Filters, f)
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.cl)
	deleted := 0
	if err == nil && len(resp.Results) != 1 {
		err = errors.New("the broker's answer has no result")
	}
	if err == nil {
		res := resp.Results[0]
		if err = kerr.ErrorForCode(res.ErrorCode); err != nil && res.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *res.ErrorMessage)
		}
		for _, m := range res.MatchingACLs {
			if e := kerr.ErrorForCode(m.ErrorCode); e != nil {
				err = errors.Join(err, e)
			} else {
				deleted++
			}
		}
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, fmt.Errorf("deleting the ACL: %w", err))
		return
	}
	done(w, r, Prefix+"acls", fmt.Sprintf("%d ACL deleted", deleted))
}

// quotaRow is one entity's quotas.
type quotaRow struct {
	// Entity is "user=alice, client-id=<default>"; Parts are the delete
	// forms' fields.
	Entity string
	Parts  []quotaPart
	Values []string // key=value
}

type quotaPart struct {
	Type, Name string
	Default    bool
}

type quotasData struct {
	Quotas []quotaRow
	Err    string
	Keys   []string // quotaKeys, for the form
}

// quotaKeys are the client quotas Kafka defines; the form offers them.
var quotaKeys = []string{"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate", "connection_creation_rate"}

func (c *Console) handleQuotas(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	d := quotasData{Keys: quotaKeys}
	described, err := c.adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		d.Err = err.Error()
	}
	for _, q := range described {
		row := quotaRow{Entity: q.Entity.String()}
		for _, p := range q.Entity {
			part := quotaPart{Type: p.Type, Default: p.Name == nil}
			if p.Name != nil {
				part.Name = *p.Name
			}
			row.Parts = append(row.Parts, part)
		}
		for _, v := range q.Values {
			row.Values = append(row.Values, v.Key+"="+strconv.FormatFloat(v.Value, 'f', -1, 64))
		}
		slices.Sort(row.Values)
		d.Quotas = append(d.Quotas, row)
	}
	slices.SortFunc(d.Quotas, func(a, b quotaRow) int { return strings.Compare(a.Entity, b.Entity) })
	c.render(w, r, http.StatusOK, "quotas", page{Title: "Quotas", Nav: "quotas", Data: d})
}

// quotaEntity reads the form's entity: user and/or client-id (or ip),
// each a name or, with its "default" box, the default entity.
func quotaEntity(r *http.Request) (kadm.ClientQuotaEntity, error) {
	var e kadm.ClientQuotaEntity
	for _, typ := range []string{"user", "client-id", "ip"} {
		name := strings.TrimSpace(r.PostFormValue(typ))
		def := r.PostFormValue(typ+"_default") == "on"
		switch {
		case def:
			e = append(e, kadm.ClientQuotaEntityComponent{Type: typ})
		case name != "":
			e = append(e, kadm.ClientQuotaEntityComponent{Type: typ, Name: &name})
		}
	}
	if len(e) == 0 {
		return nil, errors.New("name a user, a client id or an ip, or tick its default")
	}
	return e, nil
}

// handleAlterQuota sets one quota of an entity or, with remove, removes
// it.
func (c *Console) handleAlterQuota(w http.ResponseWriter, r *http.Request) {
	entity, err := quotaEntity(r)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	key := strings.TrimSpace(r.PostFormValue("key"))
	if !slices.Contains(quotaKeys, key) {
		c.fail(w, r, http.StatusBadRequest, fmt.Errorf("quota %q: want one of %s", key, strings.Join(quotaKeys, ", ")))
		return
	}
	op := kadm.AlterClientQuotaOp{Key: key, Remove: r.PostFormValue("remove") == "on"}
	if !op.Remove {
		v, err := strconv.ParseFloat(strings.TrimSpace(r.PostFormValue("value")), 64)
		if err != nil || v < 0 {
			c.fail(w, r, http.StatusBadRequest, fmt.Errorf("quota value %q: want a number, 0 or more", r.PostFormValue("value")))
			return
		}
		op.Value = v
	}
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	res, err := c.adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{op}}})
	if err == nil {
		for _, q := range res {
			if q.Err != nil {
				err = fmt.Errorf("%w%s", q.Err, detail(q.ErrMessage))
			}
		}
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, fmt.Errorf("changing %s of %s: %w", key, entity, err))
		return
	}
	what := "set"
	if op.Remove {
		what = "removed"
	}
	done(w, r, Prefix+"quotas", fmt.Sprintf("%s of %s %s", key, entity, what))
}
