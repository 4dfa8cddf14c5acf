// DescribeClientQuotas: v0-1 (KIP-546)
//   - Lists the client quotas this agent's copy holds (meta.ClientQuotas)
//     that match the filter, as Kafka matches them: each component names
//     an entity type (user, client-id, ip) and matches an exact name
//     (EXACT), the <default> entity (DEFAULT) or any entity having that
//     type (SPECIFIED); an entity matches when it has every component's
//     type and name, and, with Strict, no other type. No components and
//     not Strict lists everything.
//   - Errors, top-level, with Kafka's messages: an empty entity type or a
//     type named twice INVALID_REQUEST, an unknown type
//     UNSUPPORTED_VERSION, ip combined with user or client-id
//     INVALID_REQUEST, EXACT without a name or DEFAULT or SPECIFIED with
//     one INVALID_REQUEST, an unknown match type INVALID_REQUEST.
//   - Entries are in key order: by user (none, <default>, names), then
//     client id. Strand stores no ip quotas, so an ip filter matches
//     nothing.
//   - ACLs: DESCRIBE_CONFIGS on the cluster, else
//     CLUSTER_AUTHORIZATION_FAILED for the whole request, as Kafka.

package kafka

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(48, 0, 1, handleDescribeClientQuotas) }

// Kafka's quota entity types.
const (
	quotaEntityUser     = "user"
	quotaEntityClientID = "client-id"
	quotaEntityIP       = "ip"
)

// quotaMatch is one filter component: match nil for any entity of the
// type, otherwise the name it must have (a QuotaDefault part for
// <default>).
type quotaMatch struct {
	typ   string
	match *meta.QuotaName
}

func handleDescribeClientQuotas(ctx context.Context, r *Request) (kmsg.Response, error) {
	req := r.Body.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	if code := r.authz().clusterCode(kmsg.ACLOperationDescribeConfigs); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	matches, e, msg := quotaFilter(req)
	if e != nil {
		resp.ErrorCode, resp.ErrorMessage = e.Code, strPtr(msg)
		return resp, nil
	}
	view := db.View()
	qs, err := view.ClientQuotas()
	view.Close()
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, strPtr(err.Error())
		return resp, nil
	}
	for _, q := range qs {
		if !quotaMatches(q.Entity, matches, req.Strict) {
			continue
		}
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range quotaParts(q.Entity) {
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = p.typ, quotaWireName(p.name)
			entry.Entity = append(entry.Entity, ent)
		}
		for _, k := range slices.Sorted(maps.Keys(q.Values)) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q.Values[k]
			entry.Values = append(entry.Values, v)
		}
		resp.Entries = append(resp.Entries, entry)
	}
	return resp, nil
}

// quotaFilter reads and checks the request's components.
func quotaFilter(req *kmsg.DescribeClientQuotasRequest) ([]quotaMatch, *kerr.Error, string) {
	var ms []quotaMatch
	seen := map[string]bool{}
	for _, c := range req.Components {
		switch {
		case c.EntityType == "":
			return nil, kerr.InvalidRequest, "Invalid empty entity type."
		case seen[c.EntityType]:
			return nil, kerr.InvalidRequest, fmt.Sprintf("Entity type %s cannot appear more than once in the filter.", c.EntityType)
		case c.EntityType != quotaEntityUser && c.EntityType != quotaEntityClientID && c.EntityType != quotaEntityIP:
			return nil, kerr.UnsupportedVersion, "Unsupported entity type " + c.EntityType
		}
		seen[c.EntityType] = true
		m := quotaMatch{typ: c.EntityType}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				return nil, kerr.InvalidRequest, "Request specified MATCH_TYPE_EXACT, but set match string to null."
			}
			n := meta.Named(*c.Match)
			m.match = &n
		case kmsg.QuotasMatchTypeDefault:
			if c.Match != nil {
				return nil, kerr.InvalidRequest, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
			}
			n := meta.DefaultQuotaName
			m.match = &n
		case kmsg.QuotasMatchTypeAny:
			if c.Match != nil {
				return nil, kerr.InvalidRequest, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
			}
		default:
			return nil, kerr.InvalidRequest, fmt.Sprintf("Unexpected match type %d", c.MatchType)
		}
		ms = append(ms, m)
	}
	if seen[quotaEntityIP] && (seen[quotaEntityUser] || seen[quotaEntityClientID]) {
		return nil, kerr.InvalidRequest, "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."
	}
	return ms, nil, ""
}

// quotaMatches reports whether e matches every component and, strict,
// has no other part.
func quotaMatches(e meta.QuotaEntity, ms []quotaMatch, strict bool) bool {
	parts := map[string]meta.QuotaName{}
	for _, p := range quotaParts(e) {
		parts[p.typ] = p.name
	}
	if strict && len(parts) != len(ms) {
		return false
	}
	for _, m := range ms {
		n, ok := parts[m.typ]
		if !ok || (m.match != nil && n != *m.match) {
			return false
		}
	}
	return true
}

type quotaPart struct {
	typ  string
	name meta.QuotaName
}

// quotaParts lists e's parts with their Kafka entity types, user first.
func quotaParts(e meta.QuotaEntity) []quotaPart {
	var ps []quotaPart
	if e.User.Kind != meta.QuotaAbsent {
		ps = append(ps, quotaPart{quotaEntityUser, e.User})
	}
	if e.ClientID.Kind != meta.QuotaAbsent {
		ps = append(ps, quotaPart{quotaEntityClientID, e.ClientID})
	}
	return ps
}

// quotaWireName is n as Kafka sends it: null for <default>.
func quotaWireName(n meta.QuotaName) *string {
	if n.Kind == meta.QuotaDefault {
		return nil
	}
	return strPtr(n.Name)
}
