// AlterConfigs: v0-2
//   - TOPIC: the topic's configs become exactly the ones given; the rest
//     go back to their defaults. Each must be a known topic config
//     (internal/topicconfig) with a valid, non-null value, else
//     INVALID_CONFIG (the confluent.* schema validation configs also
//     below strand.metadata.version 6); a name given twice is
//     INVALID_REQUEST. An invalid topic name is INVALID_TOPIC_EXCEPTION,
//     an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
//   - BROKER: "" (cluster-wide) or a broker's id: its dynamic configs
//     (broker_configs.go) become exactly the ones given. A read-only
//     broker config is INVALID_REQUEST ("Cannot update these configs
//     dynamically: Set(...)"), an unknown one or a bad value
//     INVALID_CONFIG, an id that is no broker INVALID_REQUEST, a log
//     below strand.metadata.version 3 UNSUPPORTED_VERSION.
//   - GROUP: the group's configs become exactly the ones given
//     (group_configs.go).
//   - A resource named twice is INVALID_REQUEST, answered once. Other
//     resource types are INVALID_REQUEST.
//   - ValidateOnly runs every check and proposes nothing.
//   - Deprecated by IncrementalAlterConfigs; kept because older tools
//     still send it.
//   - ACLs (authz.go): AlterConfigs on the topic
//     (TOPIC_AUTHORIZATION_FAILED), for a broker the cluster
//     (CLUSTER_AUTHORIZATION_FAILED), for a group the group
//     (GROUP_AUTHORIZATION_FAILED).

package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/topicconfig"
)

func init() { regKey(33, 0, 2, handleAlterConfigs) }

func handleAlterConfigs(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
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
				return planAlterTopic(view, res[i].ResourceName, res[i].Configs)
			case kmsg.ConfigResourceTypeBroker:
				return planAlterBroker(r, view, res[i].ResourceName, replacingBrokerAlter(res[i].Configs))
			case kmsg.ConfigResourceTypeGroupConfig:
				ops := make([]groupConfigOp, len(res[i].Configs))
				for j, c := range res[i].Configs {
					ops[j] = groupConfigOp{c.Name, c.Value}
				}
				return planAlterGroup(view, res[i].ResourceName, ops, true)
			}
			return nil, kerr.InvalidRequest, fmt.Sprintf("resource type %v is not supported", res[i].ResourceType)
		})
	for _, a := range answers {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = a.res.typ, a.res.name
		if a.err != nil {
			rr.ErrorCode, rr.ErrorMessage = a.err.Code, strPtr(a.msg)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// planAlterTopic replaces a topic's configs with configs.
func planAlterTopic(view *meta.View, name string, configs []kmsg.AlterConfigsRequestResourceConfig) (meta.Command, *kerr.Error, string) {
	if _, e, msg := topicConfigsOf(view, name); e != nil {
		return nil, e, msg
	}
	set := make(map[string]string, len(configs))
	for _, c := range configs {
		if _, dup := set[c.Name]; dup {
			return nil, kerr.InvalidRequest, fmt.Sprintf("config %q given twice", c.Name)
		}
		if c.Value == nil {
			return nil, kerr.InvalidConfig, fmt.Sprintf("null value for config %q", c.Name)
		}
		if err := topicconfig.Validate(c.Name, *c.Value); err != nil {
			return nil, kerr.InvalidConfig, err.Error()
		}
		set[c.Name] = *c.Value
	}
	if err := topicconfig.ValidateCombination(set); err != nil {
		return nil, kerr.InvalidConfig, err.Error()
	}
	if e, msg := checkSchemaConfigLevel(view, set); e != nil {
		return nil, e, msg
	}
	return meta.AlterConfigs{Name: name, Set: set}, nil, ""
}

// configResource names a config resource.
type configResource struct {
	typ  kmsg.ConfigResourceType
	name string
}

// alterAnswer is the answer for one resource.
type alterAnswer struct {
	res configResource
	err *kerr.Error
	msg string
}

// runAlters answers the n resources of an alter request, in request order,
// each resource once. plan validates resource i against the local copy and
// returns the command to propose (nil for none) or the error to answer;
// the commands are proposed together unless validateOnly.
func runAlters(ctx context.Context, db MetaDB, n int, validateOnly bool,
	resource func(i int) configResource,
	plan func(view *meta.View, i int) (meta.Command, *kerr.Error, string),
) []alterAnswer {
	counts := make(map[configResource]int, n)
	for i := range n {
		counts[resource(i)]++
	}
	var answers []alterAnswer
	var cmds []meta.Command
	var cmdIdx []int
	answered := make(map[configResource]bool, n)
	view := db.View()
	for i := range n {
		res := resource(i)
		if answered[res] {
			continue
		}
		answered[res] = true
		a := alterAnswer{res: res}
		if counts[res] > 1 {
			a.err, a.msg = kerr.InvalidRequest, "resource named more than once"
		} else if cmd, e, msg := plan(view, i); e != nil {
			a.err, a.msg = e, msg
		} else if cmd != nil && !validateOnly {
			cmds = append(cmds, cmd)
			cmdIdx = append(cmdIdx, len(answers))
		}
		answers = append(answers, a)
	}
	view.Close()
	if len(cmds) == 0 {
		return answers
	}
	outs := proposeAll(ctx, db, cmds)
	for i, idx := range cmdIdx {
		answers[idx].err, answers[idx].msg = outs[i].code()
	}
	return answers
}
