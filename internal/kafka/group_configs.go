// GROUP config resources (ConfigResourceType 32, KIP-848 and KIP-932):
// what DescribeConfigs, AlterConfigs and IncrementalAlterConfigs do with
// them. The names, defaults and valid values are Kafka 4.2's
// (meta/group_configs.go); they are stored through the log
// (meta.AlterGroupConfigs) from strand.metadata.version 9.
//   - Describe: every group config, sorted, with the group's value
//     (source GROUP_CONFIG) or its default (DEFAULT_CONFIG), for any
//     group id, existing or not, as Kafka answers.
//   - Alter: SET and DELETE (APPEND and SUBTRACT are INVALID_CONFIG: no
//     group config is a list); AlterConfigs replaces them all. An
//     unknown name or a bad value is INVALID_CONFIG (Kafka's message),
//     an empty config name INVALID_REQUEST, an empty group id
//     INVALID_GROUP_ID, a log below level 9 UNSUPPORTED_VERSION.
//   - ACLs: DescribeConfigs / AlterConfigs on the group
//     (GROUP_AUTHORIZATION_FAILED), as Kafka's ConfigAdminManager.

package kafka

import (
	"fmt"
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// groupConfigsLevel checks that the log stores group configs.
func groupConfigsLevel(view *meta.View) (*kerr.Error, string) {
	f, err := view.Features()
	if err != nil {
		return kerr.UnknownServerError, err.Error()
	}
	if level := f.MetadataLevel(); !meta.ShareGroupsAt(level) {
		return kerr.UnsupportedVersion, fmt.Sprintf("group configs are stored from %s 9; the log is at %d (strand features upgrade raises it)",
			meta.FeatureMetadata, level)
	}
	return nil, ""
}

// groupConfigEntries describes group's configs: set is what the group
// sets.
func groupConfigEntries(set map[string]string, synonyms, docs bool) []configResourceConfig {
	names := meta.GroupConfigNames()
	out := make([]configResourceConfig, 0, len(names))
	for _, name := range names {
		def, doc, _ := meta.GroupConfigDefault(name)
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name = name
		rc.ConfigType = kmsg.ConfigTypeString
		if meta.GroupConfigIsInt(name) {
			rc.ConfigType = kmsg.ConfigTypeInt
		}
		if docs {
			rc.Documentation = kmsg.StringPtr(doc)
		}
		if v, ok := set[name]; ok {
			rc.Value, rc.Source = kmsg.StringPtr(v), kmsg.ConfigSourceGroupConfig
		} else {
			rc.Value, rc.Source, rc.IsDefault = kmsg.StringPtr(def), kmsg.ConfigSourceDefaultConfig, true
		}
		if synonyms {
			rc.ConfigSynonyms = append(rc.ConfigSynonyms, configSynonym(name, rc.Value, rc.Source))
		}
		out = append(out, rc)
	}
	return out
}

// describeGroupConfigs is a GROUP resource's configs.
func describeGroupConfigs(view *meta.View, group string, synonyms, docs bool) ([]configResourceConfig, *kerr.Error, string) {
	if group == "" {
		return nil, kerr.InvalidGroupID, "group id is empty"
	}
	set, err := view.GroupConfigs(group)
	if err != nil {
		return nil, kerr.UnknownServerError, err.Error()
	}
	return groupConfigEntries(set, synonyms, docs), nil, ""
}

// groupConfigOp is one change of a group config: a value to set, or
// nil to delete.
type groupConfigOp struct {
	name  string
	value *string
}

// planAlterGroup plans the changes ops make to group's configs; replace
// makes the configs exactly the ones set (AlterConfigs).
func planAlterGroup(view *meta.View, group string, ops []groupConfigOp, replace bool) (meta.Command, *kerr.Error, string) {
	if group == "" {
		return nil, kerr.InvalidGroupID, "group id is empty"
	}
	if e, msg := groupConfigsLevel(view); e != nil {
		return nil, e, msg
	}
	cur, err := view.GroupConfigs(group)
	if err != nil {
		return nil, kerr.UnknownServerError, err.Error()
	}
	cmd := meta.AlterGroupConfigs{Group: group, Set: make(map[string]string), Replace: replace}
	seen := make(map[string]bool, len(ops))
	for _, op := range ops {
		switch {
		case op.name == "":
			return nil, kerr.InvalidRequest, "empty config name"
		case seen[op.name]:
			return nil, kerr.InvalidRequest, fmt.Sprintf("config %q named twice", op.name)
		case !meta.IsGroupConfig(op.name):
			return nil, kerr.InvalidConfig, fmt.Sprintf("unknown group config name: %s", op.name)
		}
		seen[op.name] = true
		if op.value == nil {
			if replace {
				return nil, kerr.InvalidConfig, fmt.Sprintf("null value for config %q", op.name)
			}
			cmd.Delete = append(cmd.Delete, op.name)
			continue
		}
		if err := meta.ValidateGroupConfig(op.name, *op.value); err != nil {
			return nil, kerr.InvalidConfig, err.Error()
		}
		cmd.Set[op.name] = *op.value
	}
	next := maps.Clone(cmd.Set)
	if !replace {
		next = maps.Clone(cur)
		for _, n := range cmd.Delete {
			delete(next, n)
		}
		maps.Copy(next, cmd.Set)
	}
	if err := meta.ValidateGroupConfigs(next); err != nil {
		return nil, kerr.InvalidConfig, err.Error()
	}
	if !replace && len(cmd.Set) == 0 && len(cmd.Delete) == 0 {
		return nil, nil, ""
	}
	return cmd, nil, ""
}

// incrementalGroupOps are an IncrementalAlterConfigs resource's ops on a
// group: SET and DELETE; the list ops are INVALID_CONFIG.
func incrementalGroupOps(cs []kmsg.IncrementalAlterConfigsRequestResourceConfig) ([]groupConfigOp, *kerr.Error, string) {
	ops := make([]groupConfigOp, 0, len(cs))
	for _, c := range cs {
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if c.Value == nil {
				return nil, kerr.InvalidConfig, fmt.Sprintf("null value for config %q", c.Name)
			}
			ops = append(ops, groupConfigOp{c.Name, c.Value})
		case kmsg.IncrementalAlterConfigOpDelete:
			ops = append(ops, groupConfigOp{c.Name, nil})
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			return nil, kerr.InvalidConfig, fmt.Sprintf("config %q is not a list: append and subtract do not apply", c.Name)
		default:
			return nil, kerr.InvalidRequest, fmt.Sprintf("unknown operation %d on config %q", c.Op, c.Name)
		}
	}
	return ops, nil, ""
}
