package kafka

// Dynamic broker configs (KIP-226), shared by DescribeConfigs,
// AlterConfigs and IncrementalAlterConfigs on BROKER resources. Kafka
// keeps them at two levels, the cluster-wide default (resource "") and
// one broker (its id); Strand keeps both in the log
// (meta.AlterBrokerConfigs), so any agent can change any agent's values
// and every agent applies them without a restart. Only the configs
// Strand reads at use time may be set: the retention defaults (read by
// the retention proposer at every check), message.max.bytes (at every
// Produce), max.connections, max.connections.per.ip and its overrides
// (at every accept), log.cleaner.backoff.ms and log.cleaner.dedupe.buffer.size
// (at every cleaner pass), strand.gc.grace.ms (cluster-wide only,
// read by apply: meta.GCGraceConfig) and strand.gc.delete.delay.ms
// (cluster-wide only, read by the janitor: meta.DeleteDelayConfig). A broker config that
// exists but is not dynamic is refused as Kafka refuses it
// (INVALID_REQUEST, "Cannot update these configs dynamically"); a name
// that is no broker config is INVALID_CONFIG.

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/topicconfig"
)

// topicDefaultConfigs are the dynamic broker configs that are the
// default of a topic config, with that config's name: validated as it.
// The other dynamic ones are the agent's own settings (limitConfigs).
var topicDefaultConfigs = map[string]string{
	"log.retention.ms":    "retention.ms",
	"log.retention.bytes": "retention.bytes",
	"message.max.bytes":   "max.message.bytes",
}

// isDynamic reports whether broker config name can be changed at
// runtime.
func isDynamic(name string) bool {
	_, topic := topicDefaultConfigs[name]
	_, limit := limitConfigs[name]
	return topic || limit
}

// validateDynamic checks value for dynamic broker config name, on an
// agent serving with srv.
func validateDynamic(srv Config, name, value string) error {
	if topic, ok := topicDefaultConfigs[name]; ok {
		return topicconfig.Validate(topic, value)
	}
	return limitConfigs[name].check(srv, value)
}

// configLayer is one broker-level source of topic config defaults, by
// topic config name, and of the dynamic limits (limitDocs), by broker
// config name.
type configLayer struct {
	src    kmsg.ConfigSource
	values map[string]string
}

// brokerLayers are the broker-level sources of this agent's topic config
// defaults, in Kafka's order of precedence: its dynamic values, the
// cluster-wide dynamic ones, its flags.
func brokerLayers(d *Deps, dyn meta.DynamicBrokerConfigs) []configLayer {
	byTopic := func(m map[string]string) map[string]string {
		out := make(map[string]string, len(m))
		for name, v := range m {
			_, limit := limitConfigs[name]
			switch topic, ok := topicDefaultConfigs[name]; {
			case ok:
				out[topic] = v
			case limit:
				// The agent's own limits keep their broker
				// names, which no topic config has.
				out[name] = v
			}
		}
		return out
	}
	return []configLayer{
		{kmsg.ConfigSourceDynamicBrokerConfig, byTopic(dyn.Node)},
		{kmsg.ConfigSourceDynamicDefaultBrokerConfig, byTopic(dyn.Default)},
		{kmsg.ConfigSourceStaticBrokerConfig, d.BrokerDefaults},
	}
}

// dynamicConfigsOf reads this agent's dynamic broker configs.
func (d *Deps) dynamicConfigsOf(view *meta.View) (meta.DynamicBrokerConfigs, *kerr.Error, string) {
	dyn, err := view.DynamicBrokerConfigs(d.Cluster.NodeID)
	if err != nil {
		return dyn, kerr.UnknownServerError, err.Error()
	}
	return dyn, nil, ""
}

// clusterConfigEntries describes the cluster-wide resource (""): the
// dynamic defaults set there, as Kafka lists its <default> entity.
func clusterConfigEntries(defaults map[string]string, synonyms, docs bool) []configResourceConfig {
	out := make([]configResourceConfig, 0, len(defaults))
	for _, name := range slices.Sorted(maps.Keys(defaults)) {
		if !isDynamic(name) {
			continue
		}
		l := limitConfigs[name]
		typ, doc := l.typ, l.doc
		if topic, ok := topicDefaultConfigs[name]; ok {
			k, _ := topicconfig.Lookup(topic)
			typ, doc = kmsg.ConfigType(k.Type), "Default of topic config "+topic+"."
		}
		v := defaults[name]
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name, rc.Value, rc.Source, rc.ConfigType = name, &v, kmsg.ConfigSourceDynamicDefaultBrokerConfig, typ
		rc.ReadOnly = false
		if docs {
			rc.Documentation = kmsg.StringPtr(doc)
		}
		if synonyms {
			rc.ConfigSynonyms = append(rc.ConfigSynonyms, configSynonym(name, &v, rc.Source))
		}
		out = append(out, rc)
	}
	return out
}

// brokerAlter is what an alter asks of one BROKER resource, either
// request's: the values to set and the names to delete, with every name
// the request gave.
type brokerAlter struct {
	names   []string
	set     map[string]string
	del     []string
	replace bool
	// bad is the first error found while reading the request's ops.
	bad *kerr.Error
	msg string
}

// planAlterBroker checks an alter of BROKER resource name and returns
// the command that makes it.
func planAlterBroker(r *Request, view *meta.View, name string, alt brokerAlter) (meta.Command, *kerr.Error, string) {
	if e, msg := checkBrokerTarget(r, view, name); e != nil {
		return nil, e, msg
	}
	if e, msg := checkBrokerNames(r, alt.names); e != nil {
		return nil, e, msg
	}
	if alt.bad != nil {
		return nil, alt.bad, alt.msg
	}
	if _, set := alt.set[meta.DeleteDelayConfig]; set && name != "" {
		// The janitor reads only the cluster-wide value; one agent's
		// would be stored and never used. (Apply refuses a node's
		// strand.gc.grace.ms itself.)
		return nil, kerr.InvalidConfig, meta.DeleteDelayConfig + " is cluster-wide: set it on the default broker resource"
	}
	for _, n := range slices.Sorted(maps.Keys(alt.set)) {
		var srv Config
		if r.Conn != nil {
			srv = r.Conn.srv.cfg
		}
		if err := validateDynamic(srv, n, alt.set[n]); err != nil {
			return nil, kerr.InvalidConfig, fmt.Sprintf("Invalid value %s for configuration %s: %v", alt.set[n], n, err)
		}
	}
	if !alt.replace && len(alt.set) == 0 && len(alt.del) == 0 {
		return nil, nil, ""
	}
	if e, msg := checkDynamicLevel(view); e != nil {
		return nil, e, msg
	}
	return meta.AlterBrokerConfigs{Resource: name, Set: alt.set, Delete: alt.del, Replace: alt.replace}, nil, ""
}

// checkBrokerTarget checks that name is "" or a broker of the cluster.
func checkBrokerTarget(r *Request, view *meta.View, name string) (*kerr.Error, string) {
	if name != "" {
		id, err := strconv.ParseInt(name, 10, 32)
		if err != nil || !meta.ValidBrokerResource(name) {
			return kerr.InvalidRequest, fmt.Sprintf("Node id must be an integer, but it is: %s", name)
		}
		known, err := knownBrokers(view, r.Deps.brokers(r.Conn))
		if err != nil {
			return kerr.UnknownServerError, err.Error()
		}
		if !known[int32(id)] && int32(id) != r.Deps.Cluster.NodeID {
			return kerr.InvalidRequest, fmt.Sprintf("Unexpected broker id %d: no such broker in the cluster", id)
		}
	}
	return nil, ""
}

// checkDynamicLevel checks that the log can hold dynamic configs.
func checkDynamicLevel(view *meta.View) (*kerr.Error, string) {
	f, err := view.Features()
	if err != nil {
		return kerr.UnknownServerError, err.Error()
	}
	if level := f.MetadataLevel(); level < meta.MetadataLevel3 {
		return kerr.UnsupportedVersion, fmt.Sprintf("Dynamic broker configs are stored from %s %d; the log is at %d (strand features upgrade raises it).",
			meta.FeatureMetadata, meta.MetadataLevel3, level)
	}
	return nil, ""
}

// checkBrokerNames refuses names that are not dynamic broker configs:
// INVALID_REQUEST for broker configs that exist but are read-only, with
// Kafka's message, then INVALID_CONFIG for the unknown.
func checkBrokerNames(r *Request, names []string) (*kerr.Error, string) {
	known := map[string]bool{}
	for _, c := range brokerConfigEntries(r, nil, false, false) {
		known[c.Name] = true
	}
	var readOnly, unknown []string
	for _, n := range names {
		switch {
		case isDynamic(n):
		case known[n]:
			readOnly = append(readOnly, n)
		default:
			unknown = append(unknown, n)
		}
	}
	if len(readOnly) > 0 {
		return kerr.InvalidRequest, "Cannot update these configs dynamically: Set(" + strings.Join(readOnly, ", ") + ")"
	}
	if len(unknown) > 0 {
		return kerr.InvalidConfig, "Unknown broker configs: " + strings.Join(unknown, ", ")
	}
	return nil, ""
}

// incrementalBrokerAlter reads IncrementalAlterConfigs ops of a BROKER
// resource.
func incrementalBrokerAlter(ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) brokerAlter {
	alt := brokerAlter{set: map[string]string{}}
	fail := func(e *kerr.Error, format string, args ...any) {
		if alt.bad == nil {
			alt.bad, alt.msg = e, fmt.Sprintf(format, args...)
		}
	}
	for _, op := range ops {
		if slices.Contains(alt.names, op.Name) {
			fail(kerr.InvalidRequest, "config %q named twice", op.Name)
		}
		alt.names = append(alt.names, op.Name)
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value == nil {
				fail(kerr.InvalidConfig, "null value for config %q", op.Name)
				continue
			}
			alt.set[op.Name] = *op.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			alt.del = append(alt.del, op.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			// No dynamic broker config is a list.
			fail(kerr.InvalidConfig, "Config value append is not allowed for config key: %s", op.Name)
		default:
			fail(kerr.InvalidRequest, "unknown operation %d on config %q", op.Op, op.Name)
		}
	}
	return alt
}

// replacingBrokerAlter reads AlterConfigs configs of a BROKER resource.
func replacingBrokerAlter(configs []kmsg.AlterConfigsRequestResourceConfig) brokerAlter {
	alt := brokerAlter{set: map[string]string{}, replace: true}
	for _, c := range configs {
		switch {
		case slices.Contains(alt.names, c.Name):
			if alt.bad == nil {
				alt.bad, alt.msg = kerr.InvalidRequest, fmt.Sprintf("config %q given twice", c.Name)
			}
		case c.Value == nil:
			if alt.bad == nil {
				alt.bad, alt.msg = kerr.InvalidConfig, fmt.Sprintf("null value for config %q", c.Name)
			}
		default:
			alt.set[c.Name] = *c.Value
		}
		alt.names = append(alt.names, c.Name)
	}
	return alt
}
