// DescribeConfigs: v0-4
//   - TOPIC: every config of internal/topicconfig, sorted by name, with
//     the topic's value (source DYNAMIC_TOPIC_CONFIG) or, unset, its
//     broker-level default (see BROKER), plus any stored config this
//     build does not know.
//     Topic configs are neither read-only nor sensitive; IsDefault (v0) is
//     "not set on the topic". An invalid name is INVALID_TOPIC_EXCEPTION,
//     an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
//   - BROKER: for this agent's id, a fixed set of broker configs (listener,
//     limits, auto-creation, and the topic defaults under their broker
//     names), read-only but the dynamic ones (broker_configs.go:
//     log.retention.ms, log.retention.bytes, message.max.bytes,
//     max.connections, max.connections.per.ip(.overrides),
//     log.cleaner.backoff.ms,
//     log.cleaner.dedupe.buffer.size). A dynamic config's value is
//     the first of, as Kafka orders them: this agent's dynamic value
//     (DYNAMIC_BROKER_CONFIG), the cluster-wide one
//     (DYNAMIC_DEFAULT_BROKER_CONFIG), the agent's flag
//     (STATIC_BROKER_CONFIG: log.retention.ms, log.retention.bytes;
//     log.retention.check.interval.ms too), Kafka's default; the rest are
//     its synonyms. "" (the cluster-wide resource) lists the dynamic
//     defaults set there. Another id or a non-number is INVALID_REQUEST,
//     as Kafka answers.
//   - ConfigNames null or empty means all; otherwise only those, and
//     names that are not configs are left out.
//   - v1+ IncludeSynonyms: a topic config lists its topic value (if set),
//     then under the broker config name (log.retention.ms for
//     retention.ms) each broker-level value in the order above, then
//     Kafka's default. A topic that sets nothing reports the first
//     broker-level value with its source.
//   - v3+ ConfigType, and Documentation when asked.
//   - BROKER_LOGGER: for this agent's id, its loggers (root and one per
//     component) with their levels (DYNAMIC_BROKER_LOGGER_CONFIG), as
//     broker_loggers.go keeps them.
//   - GROUP: every group config of Kafka 4.2 with the group's value
//     (GROUP_CONFIG) or its default (group_configs.go).
//   - Left out: CLIENT_METRICS resources (INVALID_REQUEST).
//   - ACLs (authz.go): DescribeConfigs on the topic
//     (TOPIC_AUTHORIZATION_FAILED), for a broker the cluster
//     (CLUSTER_AUTHORIZATION_FAILED), for a group the group
//     (GROUP_AUTHORIZATION_FAILED).

package kafka

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/topicconfig"
)

func init() { regKey(32, 0, 4, handleDescribeConfigs) }

type configResourceConfig = kmsg.DescribeConfigsResponseResourceConfig

func handleDescribeConfigs(_ context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	synonyms := req.Version >= 1 && req.IncludeSynonyms
	docs := req.Version >= 3 && req.IncludeDocumentation

	var view *meta.View
	defer func() {
		if view != nil {
			view.Close()
		}
	}()
	z := r.authz()
	for _, rr := range req.Resources {
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		if e := z.configErr(kmsg.ACLOperationDescribeConfigs, rr.ResourceType, rr.ResourceName); e != nil {
			res.ErrorCode = e.Code
			resp.Resources = append(resp.Resources, res)
			continue
		}
		var e *kerr.Error
		var msg string
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if view == nil {
				view = db.View()
			}
			var configs map[string]string
			var dyn meta.DynamicBrokerConfigs
			if configs, e, msg = topicConfigsOf(view, rr.ResourceName); e == nil {
				if dyn, e, msg = r.Deps.dynamicConfigsOf(view); e == nil {
					res.Configs = topicConfigEntries(configs, brokerLayers(r.Deps, dyn), synonyms, docs)
				}
			}
		case kmsg.ConfigResourceTypeBroker:
			var self bool
			if self, e, msg = r.Deps.brokerResource(rr.ResourceName); e != nil {
				break
			}
			if view == nil {
				view = db.View()
			}
			var dyn meta.DynamicBrokerConfigs
			if dyn, e, msg = r.Deps.dynamicConfigsOf(view); e != nil {
				break
			}
			if self {
				res.Configs = brokerConfigEntries(r, brokerLayers(r.Deps, dyn), synonyms, docs)
			} else {
				res.Configs = clusterConfigEntries(dyn.Default, synonyms, docs)
			}
		case kmsg.ConfigResourceTypeBrokerLogger:
			if e, msg = r.Deps.checkLoggerResource(rr.ResourceName); e == nil {
				res.Configs = loggerConfigEntries(r.Deps.Loggers, synonyms)
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			if view == nil {
				view = db.View()
			}
			res.Configs, e, msg = describeGroupConfigs(view, rr.ResourceName, synonyms, docs)
		default:
			e, msg = kerr.InvalidRequest, fmt.Sprintf("resource type %v is not supported", rr.ResourceType)
		}
		if e != nil {
			res.ErrorCode, res.ErrorMessage, res.Configs = e.Code, strPtr(msg), nil
		} else {
			res.Configs = filterConfigs(res.Configs, rr.ConfigNames)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return resp, nil
}

// topicConfigsOf returns the configs set on topic name.
func topicConfigsOf(view *meta.View, name string) (map[string]string, *kerr.Error, string) {
	if !meta.ValidTopicName(name) {
		return nil, kerr.InvalidTopicException, topicNameError(name)
	}
	t, ok, err := view.Topic(name)
	switch {
	case err != nil:
		return nil, kerr.UnknownServerError, err.Error()
	case !ok:
		return nil, kerr.UnknownTopicOrPartition, fmt.Sprintf("no topic %q", name)
	}
	return t.Configs, nil, ""
}

// brokerResource checks a BROKER resource name: "" (cluster defaults) or
// this agent's id, which sets self.
func (d *Deps) brokerResource(name string) (self bool, e *kerr.Error, msg string) {
	if name == "" {
		return false, nil, ""
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || int32(id) != d.Cluster.NodeID {
		return false, kerr.InvalidRequest, fmt.Sprintf("unexpected broker id %q: this is broker %d", name, d.Cluster.NodeID)
	}
	return true, nil, ""
}

// topicConfigEntries describes a topic whose configs are set, on an
// agent whose broker-level defaults are layers (by topic config name,
// highest precedence first).
func topicConfigEntries(set map[string]string, layers []configLayer, synonyms, docs bool) []configResourceConfig {
	out := make([]configResourceConfig, 0, len(topicconfig.Keys())+len(set))
	for _, k := range topicconfig.Keys() {
		v, isSet := set[k.Name]
		chain := defaultChain(k, layers)
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name = k.Name
		rc.ConfigType = kmsg.ConfigType(k.Type)
		if docs {
			rc.Documentation = kmsg.StringPtr(k.Doc)
		}
		if isSet {
			rc.Value, rc.Source = &v, kmsg.ConfigSourceDynamicTopicConfig
		} else {
			rc.Value, rc.Source, rc.IsDefault = chain[0].Value, chain[0].Source, true
		}
		if synonyms {
			if isSet {
				rc.ConfigSynonyms = append(rc.ConfigSynonyms, configSynonym(k.Name, &v, kmsg.ConfigSourceDynamicTopicConfig))
			}
			if k.BrokerSynonym != "" {
				rc.ConfigSynonyms = append(rc.ConfigSynonyms, chain...)
			}
		}
		out = append(out, rc)
	}
	// Configs stored but unknown to this build (another build's, or
	// written straight into the database) are shown as they are.
	for name, v := range set {
		if _, known := topicconfig.Lookup(name); known {
			continue
		}
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name, rc.Value, rc.Source = name, kmsg.StringPtr(v), kmsg.ConfigSourceDynamicTopicConfig
		if synonyms {
			rc.ConfigSynonyms = append(rc.ConfigSynonyms, configSynonym(name, rc.Value, rc.Source))
		}
		out = append(out, rc)
	}
	slices.SortFunc(out, func(a, b configResourceConfig) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// defaultChain is what a topic that does not set k falls back to, under
// k's broker config name (k's own name if it has none), highest
// precedence first: each layer that sets it, then Kafka's default.
func defaultChain(k topicconfig.Key, layers []configLayer) []configSynonymT {
	name := k.BrokerSynonym
	if name == "" {
		name = k.Name
	}
	var chain []configSynonymT
	for _, l := range layers {
		if v, ok := l.values[k.Name]; ok {
			chain = append(chain, configSynonym(name, &v, l.src))
		}
	}
	def := k.Default
	return append(chain, configSynonym(name, &def, kmsg.ConfigSourceDefaultConfig))
}

// configSynonymT is one synonym of a described config.
type configSynonymT = kmsg.DescribeConfigsResponseResourceConfigConfigSynonym

func configSynonym(name string, v *string, src kmsg.ConfigSource) configSynonymT {
	s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	s.Name, s.Value, s.Source = name, v, src
	return s
}

// brokerConfigEntries describes this agent: what it was configured with
// (STATIC_BROKER_CONFIG), the defaults it applies (DEFAULT_CONFIG) and,
// for the topic defaults, the broker-level layers (nil: the flags only).
// The dynamic configs are the ones not read-only.
func brokerConfigEntries(r *Request, layers []configLayer, synonyms, docs bool) []configResourceConfig {
	d := r.Deps
	if layers == nil {
		layers = brokerLayers(d, meta.DynamicBrokerConfigs{})
	}
	var srv Config
	if r.Conn != nil {
		srv = r.Conn.srv.cfg
	}
	self := d.brokers(r.Conn)
	host, port := localHostPort(r.Conn)
	for _, b := range self {
		if b.NodeID == d.Cluster.NodeID {
			host, port = b.Host, b.Port
		}
	}
	type entry struct {
		name  string
		value *string
		src   kmsg.ConfigSource
		typ   kmsg.ConfigType
		doc   string
		// kafkaDefault, for a static entry Kafka has a default of, is
		// that default: its synonym after the static value.
		kafkaDefault *string
		// chain, for a topic default, is its synonyms, the value first.
		chain   []configSynonymT
		dynamic bool
	}
	static := func(name, v string, typ kmsg.ConfigType, doc string) entry {
		return entry{name: name, value: &v, src: kmsg.ConfigSourceStaticBrokerConfig, typ: typ, doc: doc}
	}
	def := func(name, v string, typ kmsg.ConfigType, doc string) entry {
		return entry{name: name, value: &v, src: kmsg.ConfigSourceDefaultConfig, typ: typ, doc: doc}
	}
	overriding := func(e entry, kafkaDefault string) entry {
		e.kafkaDefault = &kafkaDefault
		return e
	}
	node := strconv.Itoa(int(d.Cluster.NodeID))
	entries := []entry{
		static("advertised.listeners", advertisedListeners(d, r.Conn, host, port), kmsg.ConfigTypeString, "Addresses clients reach this agent at, by listener."),
		static("auto.create.topics.enable", strconv.FormatBool(d.AutoCreateTopics), kmsg.ConfigTypeBoolean, "Metadata creates unknown topics."),
		static("broker.id", node, kmsg.ConfigTypeInt, "This agent's id."),
		static("node.id", node, kmsg.ConfigTypeInt, "This agent's id."),
		static("num.partitions", strconv.Itoa(int(d.defaultPartitions())), kmsg.ConfigTypeInt, "Partitions of a topic created without a count."),
		static("socket.request.max.bytes", strconv.Itoa(int(srv.MaxRequestBytes)), kmsg.ConfigTypeInt, "Largest request accepted."),
		static("queued.max.request.bytes", strconv.FormatInt(srv.MaxQueuedRequestBytes, 10), kmsg.ConfigTypeLong, "Request bytes held across all connections."),
		static("connections.max.idle.ms", strconv.FormatInt(srv.IdleTimeout.Milliseconds(), 10), kmsg.ConfigTypeLong, "Idle connections are closed after this."),
		def("default.replication.factor", "1", kmsg.ConfigTypeInt, "Replicas shown per partition: storage is shared."),
		def("delete.topic.enable", "true", kmsg.ConfigTypeBoolean, "Topics can be deleted."),
	}
	for name, l := range limitConfigs {
		if l.serverSide && r.Conn == nil {
			continue // a handler test's Deps has no server
		}
		chain := limitChain(name, layers, l.static(d, srv), l.def)
		entries = append(entries, entry{name: name, value: chain[0].Value, src: chain[0].Source, typ: l.typ,
			doc: l.doc, chain: chain, dynamic: true})
	}
	if rack := d.Cluster.Rack; rack != "" {
		entries = append(entries, static("broker.rack", rack, kmsg.ConfigTypeString, "This agent's rack."))
	} else {
		entries = append(entries, entry{name: "broker.rack", src: kmsg.ConfigSourceDefaultConfig, typ: kmsg.ConfigTypeString, doc: "This agent's rack."})
	}
	const checkName, checkDoc = "log.retention.check.interval.ms", "How often each agent proposes retention for the partitions it owns."
	checkDefault := strconv.FormatInt(defaultRetentionCheckIntervalMs, 10)
	if ms := d.RetentionCheckIntervalMs; ms > 0 && ms != defaultRetentionCheckIntervalMs {
		entries = append(entries, overriding(static(checkName, strconv.FormatInt(ms, 10), kmsg.ConfigTypeLong, checkDoc), checkDefault))
	} else {
		entries = append(entries, def(checkName, checkDefault, kmsg.ConfigTypeLong, checkDoc))
	}
	for _, k := range topicconfig.Keys() {
		if k.BrokerSynonym == "" {
			continue
		}
		chain := defaultChain(k, layers)
		entries = append(entries, entry{name: k.BrokerSynonym, value: chain[0].Value, src: chain[0].Source, typ: kmsg.ConfigType(k.Type),
			doc: "Default of topic config " + k.Name + ".", chain: chain, dynamic: isDynamic(k.BrokerSynonym)})
	}
	// Stable, so the agent's own entries win over topic defaults of the
	// same name.
	slices.SortStableFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	entries = slices.CompactFunc(entries, func(a, b entry) bool { return a.name == b.name })

	out := make([]configResourceConfig, 0, len(entries))
	for _, e := range entries {
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name, rc.Value, rc.Source, rc.ConfigType = e.name, e.value, e.src, e.typ
		rc.ReadOnly = !e.dynamic
		rc.IsDefault = e.src == kmsg.ConfigSourceDefaultConfig
		if docs {
			rc.Documentation = kmsg.StringPtr(e.doc)
		}
		if synonyms && e.chain != nil {
			rc.ConfigSynonyms = e.chain
		} else if synonyms {
			rc.ConfigSynonyms = append(rc.ConfigSynonyms, configSynonym(e.name, e.value, e.src))
			if e.src == kmsg.ConfigSourceStaticBrokerConfig && e.kafkaDefault != nil {
				rc.ConfigSynonyms = append(rc.ConfigSynonyms, configSynonym(e.name, e.kafkaDefault, kmsg.ConfigSourceDefaultConfig))
			}
		}
		out = append(out, rc)
	}
	return out
}

// defaultRetentionCheckIntervalMs is Kafka's
// log.retention.check.interval.ms, 5 minutes.
const defaultRetentionCheckIntervalMs = 300000

// filterConfigs keeps the configs named in names; null or empty names
// keeps all.
func filterConfigs(cs []configResourceConfig, names []string) []configResourceConfig {
	if len(names) == 0 {
		return cs
	}
	return slices.DeleteFunc(cs, func(c configResourceConfig) bool { return !slices.Contains(names, c.Name) })
}

// advertisedListeners is advertised.listeners as Kafka shows it,
// "NAME://host:port,...", with the connection's listener at host:port
// (its address resolved for the client) and the others as configured.
func advertisedListeners(d *Deps, c *Conn, host string, port int32) string {
	eps := d.Cluster.Endpoints
	if len(eps) == 0 {
		return "PLAINTEXT://" + net.JoinHostPort(host, strconv.Itoa(int(port)))
	}
	listener := PlaintextListener.Name
	if c != nil {
		listener = c.Listener().Name
	}
	parts := make([]string, len(eps))
	for i, e := range eps {
		h, p := e.Host, e.Port
		if e.Listener == listener {
			h, p = host, port
		}
		parts[i] = e.Listener + "://" + net.JoinHostPort(h, strconv.Itoa(int(p)))
	}
	return strings.Join(parts, ",")
}
