// IncrementalAlterConfigs: v0-1
//   - TOPIC: each op changes one config of the topic: SET sets it, DELETE
//     returns it to its default, APPEND and SUBTRACT add or remove items
//     of a list config (cleanup.policy, the throttled-replica lists),
//     starting from the default when the topic does not set it, as Kafka
//     does. APPEND or SUBTRACT on a config that is not a list is
//     INVALID_CONFIG, as in Kafka; an unknown op is INVALID_REQUEST. Every
//     resulting value must be valid (INVALID_CONFIG: SUBTRACT cannot empty
//     cleanup.policy). Unknown names are INVALID_CONFIG, except that DELETE
//     may remove a stored config this build does not know. A config named
//     twice in one resource is INVALID_REQUEST.
//   - Only the configs named are proposed, so alters of different configs
//     of one topic never undo each other. APPEND and SUBTRACT compute the
//     new list from the local copy: two at once on the same config of the
//     same topic can lose one.
//   - BROKER: "" (cluster-wide) or a broker's id: SET and DELETE change
//     its dynamic configs (broker_configs.go: the retention defaults,
//     message.max.bytes, the connection limits, the cleaner's); APPEND
//     and SUBTRACT are INVALID_CONFIG (none is a list). Refusals as in
//     AlterConfigs.
//   - BROKER_LOGGER: this agent's id: SET changes a logger's level,
//     DELETE returns it to root's, on this agent only and not persisted
//     (broker_loggers.go).
//   - GROUP: SET and DELETE of the group's configs (group_configs.go).
//   - A resource named twice is INVALID_REQUEST, answered once; other
//     resource types are INVALID_REQUEST. ValidateOnly proposes nothing.
//   - ACLs (authz.go): AlterConfigs on the topic
//     (TOPIC_AUTHORIZATION_FAILED), for a broker the cluster
//     (CLUSTER_AUTHORIZATION_FAILED), for a group the group
//     (GROUP_AUTHORIZATION_FAILED).

package kafka

import (
	"context"
	"fmt"
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/topicconfig"
)

func init() { regKey(44, 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	res := req.Resources
	z := r.authz()
	answers := runAlters(ctx, db, len(res), req.ValidateOnly,
		func(i int) configResource { return configResource{res[i].ResourceType, res[i].ResourceName} },
		func(view *meta.View, i int) (meta.Command, *kerr.Error, string) {
			if e := z.configErr(kmsg.ACLOperationAlterConfigs, res[i].ResourceType, res[i].ResourceName); e != nil {
				return nil, e, ""
			}
			switch res[i].ResourceType {
			case kmsg.ConfigResourceTypeTopic:
				return planIncrementalAlterTopic(view, res[i].ResourceName, res[i].Configs)
			case kmsg.ConfigResourceTypeBroker:
				return planAlterBroker(r, view, res[i].ResourceName, incrementalBrokerAlter(res[i].Configs))
			case kmsg.ConfigResourceTypeBrokerLogger:
				// Applied here, on this agent only (broker_loggers.go).
				e, msg := r.Deps.alterLoggers(res[i].ResourceName, res[i].Configs, req.ValidateOnly)
				return nil, e, msg
			case kmsg.ConfigResourceTypeGroupConfig:
				ops, e, msg := incrementalGroupOps(res[i].Configs)
				if e != nil {
					return nil, e, msg
				}
				return planAlterGroup(view, res[i].ResourceName, ops, false)
			}
			return nil, kerr.InvalidRequest, fmt.Sprintf("resource type %v is not supported", res[i].ResourceType)
		})
	for _, a := range answers {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = a.res.typ, a.res.name
		if a.err != nil {
			rr.ErrorCode, rr.ErrorMessage = a.err.Code, strPtr(a.msg)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

func planIncrementalAlterTopic(view *meta.View, name string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (meta.Command, *kerr.Error, string) {
	cur, e, msg := topicConfigsOf(view, name)
	if e != nil {
		return nil, e, msg
	}
	cmd := &meta.AlterConfigs{Name: name, Set: make(map[string]string), Incremental: true}
	seen := make(map[string]bool, len(ops))
	for _, op := range ops {
		if seen[op.Name] {
			return nil, kerr.InvalidRequest, fmt.Sprintf("config %q named twice", op.Name)
		}
		seen[op.Name] = true
		k, known := topicconfig.Lookup(op.Name)
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value == nil {
				return nil, kerr.InvalidConfig, fmt.Sprintf("null value for config %q", op.Name)
			}
			if err := topicconfig.Validate(op.Name, *op.Value); err != nil {
				return nil, kerr.InvalidConfig, err.Error()
			}
			cmd.Set[op.Name] = *op.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			if _, stored := cur[op.Name]; !known && !stored {
				return nil, kerr.InvalidConfig, fmt.Sprintf("unknown topic config %q", op.Name)
			}
			cmd.Delete = append(cmd.Delete, op.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			switch {
			case !known:
				return nil, kerr.InvalidConfig, fmt.Sprintf("unknown topic config %q", op.Name)
			case k.Type != topicconfig.TypeList:
				return nil, kerr.InvalidConfig, fmt.Sprintf("config %q is not a list: append and subtract do not apply", op.Name)
			case op.Value == nil:
				return nil, kerr.InvalidConfig, fmt.Sprintf("null value for config %q", op.Name)
			}
			base, _ := topicconfig.Value(cur, op.Name)
			next := topicconfig.AppendList(base, *op.Value)
			if op.Op == kmsg.IncrementalAlterConfigOpSubtract {
				next = topicconfig.SubtractList(base, *op.Value)
			}
			if err := k.Validate(next); err != nil {
				return nil, kerr.InvalidConfig, err.Error()
			}
			cmd.Set[op.Name] = next
		default:
			return nil, kerr.InvalidRequest, fmt.Sprintf("unknown operation %d on config %q", op.Op, op.Name)
		}
	}
	if len(cmd.Set) == 0 && len(cmd.Delete) == 0 {
		return nil, nil, ""
	}
	if err := topicconfig.ValidateCombination(alteredConfigs(cur, cmd)); err != nil {
		return nil, kerr.InvalidConfig, err.Error()
	}
	if e, msg := checkSchemaConfigLevel(view, cmd.Set); e != nil {
		return nil, e, msg
	}
	return *cmd, nil, ""
}

// alteredConfigs is cur with cmd's sets and deletes applied: the configs
// the topic would have.
func alteredConfigs(cur map[string]string, cmd *meta.AlterConfigs) map[string]string {
	m := maps.Clone(cur)
	if m == nil {
		m = make(map[string]string, len(cmd.Set))
	}
	for _, n := range cmd.Delete {
		delete(m, n)
	}
	maps.Copy(m, cmd.Set)
	return m
}
