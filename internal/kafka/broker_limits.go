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
	"net/netip"
	"slices"
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
	// def is Strand's default; static the agent's flag value, from the
	// server's Config (serverSide) or Deps.
	def        string
	static     func(d *Deps, srv Config) string
	serverSide bool
	// check validates a value on an agent serving with srv.
	check func(srv Config, v string) error
}

// perIPOverridesConfig is max.connections.per.ip.overrides.
const perIPOverridesConfig = "max.connections.per.ip.overrides"

// limitConfigs are the dynamic broker configs that are the agent's own
// settings, by name. Each is read at use time: the connection limits at
// every accept (Server.connLimits), the cleaner's at every pass and
// round (cleaner/dynamic.go).
var limitConfigs = map[string]limitConfig{
	"max.connections": {typ: kmsg.ConfigTypeInt, def: strconv.Itoa(DefaultMaxConns), serverSide: true,
		doc:    "Open client connections allowed; checked at accept.",
		static: func(_ *Deps, srv Config) string { return strconv.Itoa(srv.MaxConns) },
		check:  intBetween(1, math.MaxInt32)},
	"max.connections.per.ip": {typ: kmsg.ConfigTypeInt, def: strconv.Itoa(DefaultMaxConnsPerIP), serverSide: true,
		doc:    "Open client connections allowed from one address (0: only the overrides' addresses); checked at accept.",
		static: func(_ *Deps, srv Config) string { return strconv.Itoa(max(srv.MaxConnsPerIP, 0)) },
		check:  checkConnsPerIP},
	perIPOverridesConfig: {typ: kmsg.ConfigTypeString, def: "", serverSide: true,
		doc:    "Per-address exceptions to max.connections.per.ip, as addr:n,addr:n; checked at accept.",
		static: func(_ *Deps, srv Config) string { return formatConnsPerIPOverrides(srv.MaxConnsPerIPOverrides) },
		check: func(_ Config, v string) error {
			_, err := ParseConnsPerIPOverrides(v)
			return err
		}},
	cleaner.BackoffConfig: {typ: kmsg.ConfigTypeLong, def: strconv.FormatInt(cleaner.DefaultInterval.Milliseconds(), 10),
		doc: "Pause between the cleaner's passes over the compacted partitions this agent owns, in ms.",
		static: func(d *Deps, _ Config) string {
			return orDefault(d.LogCleanerBackoffMs, cleaner.DefaultInterval.Milliseconds())
		},
		check: intBetween(1, math.MaxInt64/int64(time.Millisecond))},
	cleaner.DedupeBufferConfig: {typ: kmsg.ConfigTypeLong, def: strconv.Itoa(cleaner.DefaultMapBytes),
		doc: "Memory of the key map of one compaction round of a compacted topic, in bytes.",
		static: func(d *Deps, _ Config) string {
			return orDefault(d.LogCleanerDedupeBufferSize, cleaner.DefaultMapBytes)
		},
		check: intBetween(cleaner.EntryBytes, cleaner.MaxMapBytes)},
	// Cluster-wide only: apply refuses a node's value (meta.alterGrace),
	// and its floor, read at each check, may be lowered by a test build.
	meta.GCGraceConfig: {typ: kmsg.ConfigTypeLong, def: strconv.FormatInt(meta.DefaultGCGrace, 10),
		doc: "How old an object no commit names must be to be deleted as an orphan, and the most a data object no index entry points into is kept before deletion, in ms; cluster-wide only.",
		static: func(d *Deps, _ Config) string {
			return orDefault(d.GCGraceMs, meta.DefaultGCGrace)
		},
		check: func(srv Config, v string) error {
			return intBetween(meta.MinGCGraceMs, math.MaxInt64/int64(time.Millisecond))(srv, v)
		}},
	// Read by the janitor from the cluster-wide configs only; its floor,
	// read at each check, may be lowered by a test build.
	meta.DeleteDelayConfig: {typ: kmsg.ConfigTypeLong, def: strconv.FormatInt(meta.DefaultDeleteDelayMs, 10),
		doc: "How long a data object no index entry points into is kept before deletion once every live agent has applied that, in ms (Kafka's log.segment.delete.delay.ms); never more than " + meta.GCGraceConfig + "; cluster-wide only.",
		static: func(d *Deps, _ Config) string {
			return orDefault(d.GCDeleteDelayMs, meta.DefaultDeleteDelayMs)
		},
		check: func(srv Config, v string) error {
			return intBetween(meta.MinDeleteDelayMs, math.MaxInt64/int64(time.Millisecond))(srv, v)
		}},
}

// orDefault is n in decimal, def for Deps' zero.
func orDefault(n, def int64) string {
	if n == 0 {
		n = def
	}
	return strconv.FormatInt(n, 10)
}

// intBetween checks for an integer in [lo, hi].
func intBetween(lo, hi int64) func(Config, string) error {
	return func(_ Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("must be an integer from %d to %d", lo, hi)
		}
		return nil
	}
}

// checkConnsPerIP allows Kafka's 0, which admits only the overrides'
// addresses, only where the agent has static overrides: without any it
// would refuse every client.
func checkConnsPerIP(srv Config, v string) error {
	if err := intBetween(0, math.MaxInt32)(srv, v); err != nil {
		return err
	}
	if strings.TrimSpace(v) == "0" && len(srv.MaxConnsPerIPOverrides) == 0 {
		return fmt.Errorf("0 admits nobody without --max-connections-per-ip-overrides")
	}
	return nil
}

// formatConnsPerIPOverrides is overrides as ParseConnsPerIPOverrides
// reads them, sorted.
func formatConnsPerIPOverrides(overrides map[netip.Addr]int) string {
	parts := make([]string, 0, len(overrides))
	for _, a := range slices.SortedFunc(maps.Keys(overrides), netip.Addr.Compare) {
		host := a.String()
		if a.Is6() {
			host = "[" + host + "]"
		}
		parts = append(parts, host+":"+strconv.Itoa(overrides[a]))
	}
	return strings.Join(parts, ",")
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

// connLimits are max.connections, max.connections.per.ip (NoConnsPerIP
// for 0) and its overrides as they stand. The caller must not change
// overrides.
func (s *Server) connLimits() (conns, perIP int, overrides map[netip.Addr]int) {
	conns, perIP, overrides = s.cfg.MaxConns, s.cfg.MaxConnsPerIP, s.cfg.MaxConnsPerIPOverrides
	db, err := s.cfg.Deps.meta()
	if err != nil {
		return conns, perIP, overrides
	}
	view := db.View()
	defer view.Close()
	dyn, err := view.DynamicBrokerConfigs(s.cfg.Deps.Cluster.NodeID)
	if err != nil {
		return conns, perIP, overrides
	}
	conns = int(dyn.Int64In("max.connections", 1, math.MaxInt32, int64(conns)))
	switch n := dyn.Int64In("max.connections.per.ip", 0, math.MaxInt32, -1); {
	case n == 0:
		perIP = NoConnsPerIP
	case n > 0:
		perIP = int(n)
	}
	for _, m := range []map[string]string{dyn.Node, dyn.Default} {
		if v, ok := m[perIPOverridesConfig]; ok {
			// A value that does not parse (another build's) counts
			// as unset, as Int64In's do.
			if o, err := ParseConnsPerIPOverrides(v); err == nil {
				return conns, perIP, o
			}
		}
	}
	return conns, perIP, overrides
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
