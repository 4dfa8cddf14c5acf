package kafka

// The dynamic broker configs Strand reads at use time rather than from
// its flags alone (broker_configs.go has the rest): message.max.bytes at
// every Produce, through the topic's effective config, and the
// connection limits at every accept. Each is this agent's dynamic value,
// else the cluster-wide one, else the flag's.

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/topicconfig"
)

// limitDocs documents the dynamic broker configs that are no topic
// config's default.
var limitDocs = map[string]string{
	"max.connections":        "Open client connections allowed; checked at accept.",
	"max.connections.per.ip": "Open client connections allowed from one address (0: only the overrides' addresses); checked at accept.",
}

func checkMaxConns(_ Config, v string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil || n < 1 {
		return fmt.Errorf("must be an integer of at least 1")
	}
	return nil
}

// checkMaxConnsPerIP allows 0, as Kafka does, only where the static
// overrides admit some address: otherwise it would refuse every client.
func checkMaxConnsPerIP(srv Config, v string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	switch {
	case err != nil || n < 0:
		return fmt.Errorf("must be a non-negative integer")
	case n == 0 && len(srv.MaxConnsPerIPOverrides) == 0:
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
	conns = int(dyn.Int64("max.connections", int64(conns)))
	switch n := dyn.Int64("max.connections.per.ip", -1); {
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
