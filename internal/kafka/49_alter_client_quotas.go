// AlterClientQuotas: v0-1 (KIP-546)
//   - Sets and removes the quotas of user, client-id and (user,
//     client-id) entities, a null name being <default>, through the log
//     (meta.AlterClientQuota), so every agent enforces them once applied
//     (quotas.go). Each entry succeeds or fails on its own, as in Kafka's
//     controller; the valid ones are proposed together.
//   - Validated as Kafka's ClientQuotaControlManager does, with its
//     messages, each INVALID_REQUEST for its entry: an empty entity, an
//     entity type named twice or unknown, an empty name, a key altered
//     twice, an entity named twice in the request ("Ignoring duplicate
//     entity"), a key that is not producer_byte_rate,
//     consumer_byte_rate or request_percentage ("Invalid configuration
//     key"), a value not above 0, a fractional byte rate.
//   - controller_mutation_rate (KIP-599) is refused as an unknown key:
//     Strand does not enforce it. ip entities (connection_creation_rate)
//     are refused too: Strand has no connection rate quotas.
//   - ValidateOnly checks everything and writes nothing.
//   - Needs strand.metadata.version 4; below it every entry is
//     UNSUPPORTED_VERSION.
//   - ACLs: ALTER_CONFIGS on the cluster, else every entry
//     CLUSTER_AUTHORIZATION_FAILED, as Kafka.

package kafka

import (
	"context"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/quota"
)

func init() { regKey(49, 0, 1, handleAlterClientQuotas) }

// quotaKeyIntegral says, for every key Strand enforces, whether Kafka
// types it LONG (a whole number) rather than DOUBLE.
var quotaKeyIntegral = map[string]bool{
	quota.KeyProducerByteRate:  true,
	quota.KeyConsumerByteRate:  true,
	quota.KeyRequestPercentage: false,
}

func handleAlterClientQuotas(ctx context.Context, r *Request) (kmsg.Response, error) {
	req := r.Body.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	view := db.View()
	f, ferr := view.Features()
	view.Close()
	var levelErr string
	denied := r.authz().clusterCode(kmsg.ACLOperationAlterConfigs) != 0
	switch {
	case denied:
		levelErr = "Cluster authorization failed."
	case ferr != nil:
		levelErr = ferr.Error()
	case f.MetadataLevel() < meta.MetadataLevel4:
		levelErr = fmt.Sprintf("Client quotas are stored from %s %d; the log is at %d (strand features upgrade raises it).",
			meta.FeatureMetadata, meta.MetadataLevel4, f.MetadataLevel())
	}

	resp.Entries = make([]kmsg.AlterClientQuotasResponseEntry, len(req.Entries))
	var cmds []meta.Command
	var cmdEntry []int
	seen := map[meta.QuotaEntity]bool{}
	for i := range req.Entries {
		in := &req.Entries[i]
		out := &resp.Entries[i]
		*out = kmsg.NewAlterClientQuotasResponseEntry()
		for _, e := range in.Entity {
			oe := kmsg.NewAlterClientQuotasResponseEntryEntity()
			oe.Type, oe.Name = e.Type, e.Name
			out.Entity = append(out.Entity, oe)
		}
		cmd, e, msg := quotaAlteration(in)
		if e == nil && seen[cmd.Entity] {
			e, msg = kerr.InvalidRequest, "Ignoring duplicate entity "+quotaEntityString(cmd.Entity)
		}
		if denied {
			e, msg = kerr.ClusterAuthorizationFailed, levelErr
		} else if e == nil && levelErr != "" {
			e, msg = kerr.UnsupportedVersion, levelErr
			if ferr != nil {
				e = kerr.UnknownServerError
			}
		}
		if e != nil {
			out.ErrorCode, out.ErrorMessage = e.Code, strPtr(msg)
			continue
		}
		seen[cmd.Entity] = true
		if !req.ValidateOnly {
			cmds = append(cmds, cmd)
			cmdEntry = append(cmdEntry, i)
		}
	}
	if len(cmds) == 0 {
		return resp, nil
	}
	for i, o := range proposeAll(ctx, db, cmds) {
		if e, msg := o.code(); e != nil {
			out := &resp.Entries[cmdEntry[i]]
			out.ErrorCode, out.ErrorMessage = e.Code, strPtr(msg)
		}
	}
	r.quotas().invalidate()
	return resp, nil
}

// quotaAlteration reads and checks one entry as Kafka's controller does.
func quotaAlteration(in *kmsg.AlterClientQuotasRequestEntry) (meta.AlterClientQuota, *kerr.Error, string) {
	var cmd meta.AlterClientQuota
	if len(in.Entity) == 0 {
		return cmd, kerr.InvalidRequest, "Invalid empty client quota entity"
	}
	seen := map[string]bool{}
	for _, e := range in.Entity {
		if seen[e.Type] {
			return cmd, kerr.InvalidRequest, "Invalid client quota entity, duplicate entity entry " + e.Type
		}
		seen[e.Type] = true
		name := meta.DefaultQuotaName
		if e.Name != nil {
			name = meta.Named(*e.Name)
		}
		switch e.Type {
		case quotaEntityUser:
			cmd.Entity.User = name
		case quotaEntityClientID:
			cmd.Entity.ClientID = name
		case quotaEntityIP:
			return cmd, kerr.InvalidRequest, "ip quotas (connection_creation_rate) are not supported"
		default:
			return cmd, kerr.InvalidRequest, "Unhandled client quota entity type: " + e.Type
		}
		switch {
		case e.Name != nil && *e.Name == "":
			return cmd, kerr.InvalidRequest, "Empty " + e.Type + " not supported"
		case e.Name != nil && len(*e.Name) > meta.MaxQuotaNameBytes:
			return cmd, kerr.InvalidRequest, fmt.Sprintf("%s name is %d bytes, at most %d", e.Type, len(*e.Name), meta.MaxQuotaNameBytes)
		}
	}
	keys := map[string]bool{}
	for _, op := range in.Ops {
		if keys[op.Key] {
			return cmd, kerr.InvalidRequest, fmt.Sprintf("Duplicate quota key %s not updating quota for this entity %s", op.Key, quotaEntityString(cmd.Entity))
		}
		keys[op.Key] = true
		if op.Remove {
			cmd.Remove = append(cmd.Remove, op.Key)
			continue
		}
		integral, known := quotaKeyIntegral[op.Key]
		switch {
		case !known:
			return cmd, kerr.InvalidRequest, "Invalid configuration key " + op.Key
		case !(op.Value > 0):
			return cmd, kerr.InvalidRequest, fmt.Sprintf("Quota %s must be greater than 0", op.Key)
		case math.IsInf(op.Value, 0):
			return cmd, kerr.InvalidRequest, fmt.Sprintf("Proposed value for %s is too large.", op.Key)
		case integral && op.Value > math.MaxInt64:
			return cmd, kerr.InvalidRequest, fmt.Sprintf("Proposed value for %s is too large for a LONG.", op.Key)
		case integral && math.Abs(math.Mod(op.Value, 1)) > 1e-6:
			return cmd, kerr.InvalidRequest, op.Key + " cannot be a fractional value."
		}
		if cmd.Set == nil {
			cmd.Set = map[string]float64{}
		}
		cmd.Set[op.Key] = op.Value
	}
	return cmd, nil, ""
}

// quotaEntityString writes e as Kafka's ClientQuotaEntity does.
func quotaEntityString(e meta.QuotaEntity) string {
	s := "ClientQuotaEntity(entries={"
	for i, p := range quotaParts(e) {
		if i > 0 {
			s += ", "
		}
		name := "null"
		if p.name.Kind == meta.QuotaNamed {
			name = p.name.Name
		}
		s += p.typ + "=" + name
	}
	return s + "})"
}
