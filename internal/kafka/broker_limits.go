package kafka

// The dynamic broker configs Strand reads at use time rather than from
// its flags alone (broker_configs.go has the rest): message.max.bytes at
// every Produce, through the topic's effective config, the connection
// limits at every accept, the cleaner's settings at every pass. Each is
// this agent's dynamic value, else the cluster-wide one, else the
// flag's.

import (
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/cleaner"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/topicconfig"
)

// limitConfig is a dynamic broker config that is no topic config's
// default: one of the agent's own settings.
type limitConfig struct {
	typ kmsg.ConfigType
	doc string
	// lo and hi bound a valid value.
	lo, hi int64
	// def is Strand's default; static the agent's flag value, from the
	// server's Config (serverSide) or Deps.
	def        int64
	static     func(d *Deps, srv Config) int64
	serverSide bool
}

// limitConfigs are the dynamic broker configs that are the agent's own
// settings, by name. Each is read at use time: the connection limits at
// every accept (Server.connLimits), the cleaner's at every pass and
// round (cleaner/dynamic.go).
var limitConfigs = map[string]limitConfig{
	"max.connections": {typ: kmsg.ConfigTypeInt, lo: 1, hi: math.MaxInt32, def: DefaultMaxConns, serverSide: true,
		doc:    "Open client connections allowed; checked at accept.",
		static: func(_ *Deps, srv Config) int64 { return int64(srv.MaxConns) }},
	"max.connections.per.ip": {typ: kmsg.ConfigTypeInt, lo: 0, hi: math.MaxInt32, def: DefaultMaxConnsPerIP, serverSide: true,
		doc:    "Open client connections allowed from one address (0: only the overrides' addresses); checked at accept.",
		static: func(_ *Deps, srv Config) int64 { return int64(max(srv.MaxConnsPerIP, 0)) }},
	cleaner.BackoffConfig: {typ: kmsg.ConfigTypeLong, lo: 1, hi: math.MaxInt64 / int64(time.Millisecond), def: cleaner.DefaultInterval.Milliseconds(),
		doc:    "Pause between the cleaner's passes over the compacted partitions this agent owns, in ms.",
		static: func(d *Deps, _ Config) int64 { return d.LogCleanerBackoffMs }},
	cleaner.DedupeBufferConfig: {typ: kmsg.ConfigTypeLong, lo: cleaner.EntryBytes, hi: cleaner.MaxMapBytes, def: cleaner.DefaultMapBytes,
		doc:    "Memory of the key map of one compaction round of a compacted topic, in bytes.",
		static: func(d *Deps, _ Config) int64 { return d.LogCleanerDedupeBufferSize }},
}

// checkLimit checks value for limit name on an agent serving with srv.
func checkLimit(srv Config, name, value string) error {
	l := limitConfigs[name]
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	switch {
	case err != nil || n < l.lo || n > l.hi:
		return fmt.Errorf("must be an integer from %d to %d", l.lo, l.hi)
	case name == "max.connections.per.ip" && n == 0 && len(srv.MaxConnsPerIPOverrides) == 0:
		// Kafka's 0 admits only the overrides' addresses: without
		// any it would refuse every client.
		return fmt.Errorf("0 admits nobody without max.connections.per.ip.overrides")
	}
	return nil
}

// withBrokerDefaults is a topic's configs set with, for each topic
// config it does not set, the value of the highest broker-level layer
// that does. set itself is not changed.
func withBrokerDefaults(set map[string]string, layers []configLayer) map[string]string {
	out, cloned := set, false
	for i := len(layers) - 1; i >= 0; i-- {
		for name, v := range layers[i].values {
			if _, own := set[name]; own {
				continue
			}
			if _, topic := topicconfig.Lookup(name); !topic {
				continue
			}
			if !cloned {
				out, cloned = make(map[string]string, len(set)+1), true
				maps.Copy(out, set)
			}
			out[name] = v
		}
	}
	return out
}

// liveLayers are this agent's broker-level layers as view has them; on
// a read error, the flags' alone (the error is the caller's to ignore:
// the limits they feed must not fail a request).
func (d *Deps) liveLayers(view *meta.View) []configLayer {
	dyn, err := view.DynamicBrokerConfigs(d.Cluster.NodeID)
	if err != nil {
		dyn = meta.DynamicBrokerConfigs{}
	}
	return brokerLayers(d, dyn)
}

// connLimits are max.connections and max.connections.per.ip as they
// stand (NoConnsPerIP for 0).
func (s *Server) connLimits() (conns, perIP int) {
	conns, perIP = s.cfg.MaxConns, s.cfg.MaxConnsPerIP
	db, err := s.cfg.Deps.meta()
	if err != nil {
		return conns, perIP
	}
	view := db.View()
	defer view.Close()
	dyn, err := view.DynamicBrokerConfigs(s.cfg.Deps.Cluster.NodeID)
	if err != nil {
		return conns, perIP
	}
	conns = int(dyn.Int64In("max.connections", 1, math.MaxInt32, int64(conns)))
	switch n := dyn.Int64In("max.connections.per.ip", 0, math.MaxInt32, -1); {
	case n == 0:
		perIP = NoConnsPerIP
	case n > 0:
		perIP = int(n)
	}
	return conns, perIP
}

// limitChain is the synonyms of dynamic broker config name, highest
// precedence first: each layer that sets it, the flag's value where it
// is not Strand's default, then the default.
func limitChain(name string, layers []configLayer, static, def string) []configSynonymT {
	var chain []configSynonymT
	for _, l := range layers {
		if l.src == kmsg.ConfigSourceStaticBrokerConfig {
			continue
		}
		if v, ok := l.values[name]; ok {
			chain = append(chain, configSynonym(name, &v, l.src))
		}
	}
	if static != def {
		chain = append(chain, configSynonym(name, &static, kmsg.ConfigSourceStaticBrokerConfig))
	}
	return append(chain, configSynonym(name, &def, kmsg.ConfigSourceDefaultConfig))
}
