package meta

// Dynamic broker configs (KIP-226): values of broker configs changed at
// runtime, cluster-wide (resource "", Kafka's <default> entity) or for
// one agent (resource = its node id in decimal), each a 0x1F record of
// the resource's configs. Every agent reads them from its copy, so a
// change applies everywhere without a restart. Which names may be set
// and what values are valid is the Kafka layer's business, as for topic
// configs; apply checks only the resource name and the limits.

import (
	"math"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// prefixBrokerConfigs keys a resource's dynamic broker configs: the
// resource name.
const prefixBrokerConfigs byte = 0x1F

// maxBrokerConfigs bounds the configs of one resource. Like apply's
// other limits it is part of what apply means.
const maxBrokerConfigs = 256

// TypeAlterBrokerConfigs is type 31, written from metadata level 3.
const TypeAlterBrokerConfigs CommandType = 31

// AlterBrokerConfigs changes the dynamic configs of a BROKER resource:
// Resource "" is the cluster-wide default, otherwise a node id. Set and
// Delete apply to the current configs; Replace makes them exactly Set
// (AlterConfigs), with Delete empty.
// Result: INVALID_REQUEST for a resource that is neither "" nor a
// non-negative node id, a name both set and deleted, or Delete with
// Replace; INVALID_CONFIG for an empty name or more than 256 configs.
// Each changes nothing.
type AlterBrokerConfigs struct {
	Resource string
	Set      map[string]string
	Delete   []string
	Replace  bool
}

func (AlterBrokerConfigs) Type() CommandType { return TypeAlterBrokerConfigs }
func (AlterBrokerConfigs) version() uint16   { return 1 }

func (c AlterBrokerConfigs) appendPayload(b []byte) []byte {
	b = appendString(b, c.Resource)
	b = appendStringMap(b, c.Set)
	b = appendStringList(b, c.Delete)
	return appendBool(b, c.Replace)
}

func decodeAlterBrokerConfigsV1(p []byte) (AlterBrokerConfigs, error) {
	r := &reader{b: p}
	var c AlterBrokerConfigs
	c.Resource = r.string()
	c.Set = r.stringMap()
	c.Delete = r.stringList()
	c.Replace = r.bool()
	return c, r.done()
}

// ValidBrokerResource reports whether name is a BROKER resource: "" or a
// node id, in decimal without sign or leading zeros.
func ValidBrokerResource(name string) bool {
	if name == "" {
		return true
	}
	id, err := strconv.ParseInt(name, 10, 32)
	return err == nil && id >= 0 && strconv.FormatInt(id, 10) == name
}

func brokerConfigsKey(resource string) []byte {
	return append([]byte{prefixBrokerConfigs}, resource...)
}

func (a *Applier) alterBrokerConfigs(c AlterBrokerConfigs) (Result, error) {
	switch {
	case !ValidBrokerResource(c.Resource):
		return failed(kerr.InvalidRequest, "broker resource %q is not a node id", c.Resource), nil
	case c.Replace && len(c.Delete) > 0:
		return failed(kerr.InvalidRequest, "delete in a replacing alter"), nil
	}
	for _, k := range c.Delete {
		if _, ok := c.Set[k]; ok {
			return failed(kerr.InvalidRequest, "config %q both set and deleted", k), nil
		}
	}
	key := brokerConfigsKey(c.Resource)
	next := make(map[string]string, len(c.Set))
	if !c.Replace {
		v, ok, err := a.get(key)
		if err != nil {
			return Result{}, err
		}
		if ok {
			if next, err = decodeBrokerConfigs(v); err != nil {
				return Result{}, err
			}
		}
		for _, k := range c.Delete {
			delete(next, k)
		}
	}
	for k, v := range c.Set {
		next[k] = v
	}
	switch _, empty := next[""]; {
	case empty:
		return failed(kerr.InvalidConfig, "empty config name"), nil
	case len(next) > maxBrokerConfigs:
		return failed(kerr.InvalidConfig, "%d configs, at most %d", len(next), maxBrokerConfigs), nil
	}
	if res, ok, err := a.alterGrace(c, next); err != nil || !ok {
		return res, err
	}
	if len(next) == 0 {
		return Result{}, a.b.Delete(key)
	}
	return Result{}, a.b.Set(key, appendStringMap([]byte{recordV1}, next))
}

// alterGrace checks what an AlterBrokerConfigs does to GCGraceConfig
// (from level 5) and applies it to the GC state; ok false refuses the
// command. The grace is cluster-wide and has a floor: a node's value
// and one below MinGCGraceMs are INVALID_CONFIG. Without a value the
// grace is DefaultGCGrace.
func (a *Applier) alterGrace(c AlterBrokerConfigs, next map[string]string) (Result, bool, error) {
	on5, err := a.level5On()
	if err != nil || !on5 {
		return Result{}, err == nil, err
	}
	v, set := next[GCGraceConfig]
	if c.Resource != "" {
		if set {
			return failed(kerr.InvalidConfig, "%s is cluster-wide: set it on the default broker resource", GCGraceConfig), false, nil
		}
		return Result{}, true, nil
	}
	grace := DefaultGCGrace
	if set {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < MinGCGraceMs {
			return failed(kerr.InvalidConfig, "%s %q: want at least %d ms, the longest an upload may take before its commit", GCGraceConfig, v, MinGCGraceMs), false, nil
		}
		grace = n
	}
	on, err := a.gcOn()
	if err != nil || !on {
		return Result{}, err == nil, err
	}
	a.setGrace(grace)
	return Result{}, true, nil
}

func decodeBrokerConfigs(v []byte) (map[string]string, error) {
	r := recordReader(v)
	m := r.stringMap()
	if err := r.done(); err != nil {
		return nil, corrupt("broker configs", err)
	}
	if m == nil {
		m = map[string]string{}
	}
	return m, nil
}

// BrokerConfigs returns the dynamic configs of a BROKER resource ("" for
// the cluster-wide defaults), empty if none are set. The caller owns the
// map.
func (v *View) BrokerConfigs(resource string) (map[string]string, error) {
	val, ok, err := v.r.Get(brokerConfigsKey(resource))
	if err != nil || !ok {
		return map[string]string{}, err
	}
	return decodeBrokerConfigs(val)
}

// DynamicBrokerConfigs are the dynamic configs an agent applies.
type DynamicBrokerConfigs struct {
	// Node holds the agent's own values (DYNAMIC_BROKER_CONFIG),
	// Default the cluster-wide ones (DYNAMIC_DEFAULT_BROKER_CONFIG).
	Node, Default map[string]string
}

// DynamicBrokerConfigs returns the dynamic configs of agent node.
func (v *View) DynamicBrokerConfigs(node int32) (DynamicBrokerConfigs, error) {
	var d DynamicBrokerConfigs
	var err error
	if d.Node, err = v.BrokerConfigs(strconv.Itoa(int(node))); err != nil {
		return d, err
	}
	d.Default, err = v.BrokerConfigs("")
	return d, err
}

// Int64 is the value of broker config name: the agent's own, else the
// cluster-wide one, else static. A value that does not parse counts as
// unset.
func (d DynamicBrokerConfigs) Int64(name string, static int64) int64 {
	return d.Int64In(name, math.MinInt64, math.MaxInt64, static)
}

// Int64In is Int64 where a value outside [lo, hi] also counts as unset:
// the Kafka layer refuses such values, but another build may have
// written one.
func (d DynamicBrokerConfigs) Int64In(name string, lo, hi, static int64) int64 {
	for _, m := range []map[string]string{d.Node, d.Default} {
		if s, ok := m[name]; ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil && n >= lo && n <= hi {
				return n
			}
		}
	}
	return static
}
