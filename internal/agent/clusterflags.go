package agent

// Flags that set cluster-wide values. Retention's defaults and the
// garbage collection grace rule every partition and every object,
// whichever agent proposes the decision; were each agent's flag its
// own, placement would hand each partition to agents of different
// values over time, and the smallest would rule them all. So they live
// in the log as cluster-wide dynamic broker configs (Kafka's <default>
// entity), and an agent's flag only sets one the log does not have yet:
// the first agent started with it decides, and a change afterwards goes
// through the log (strand cluster config set, kafka-configs
// --entity-default). An agent whose flag differs from the log's value
// says so at start and goes by the log's.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/strandkafka/strand/internal/gc"
	"github.com/strandkafka/strand/internal/meta"
)

// clusterFlag is one flag backed by a cluster-wide config.
type clusterFlag struct {
	flag, config string
	value        string
	// set: the operator gave the flag (it differs from the default).
	set bool
	// level is the metadata level from which the log holds it.
	level int16
}

func (c *Config) clusterFlags() []clusterFlag {
	return []clusterFlag{
		{"--log-retention-ms", "log.retention.ms", strconv.FormatInt(c.LogRetentionMs, 10),
			c.LogRetentionMs != DefaultLogRetentionMs, meta.MetadataLevel3},
		{"--log-retention-bytes", "log.retention.bytes", strconv.FormatInt(c.LogRetentionBytes, 10),
			c.LogRetentionBytes != -1, meta.MetadataLevel3},
		{"--gc-grace", meta.GCGraceConfig, strconv.FormatInt(c.GCGrace.Milliseconds(), 10),
			c.GCGrace != gc.DefaultGrace, meta.MetadataLevel5},
		{"--gc-delete-delay", meta.DeleteDelayConfig, strconv.FormatInt(c.GCDeleteDelay.Milliseconds(), 10),
			c.GCDeleteDelay != gc.DefaultDeleteDelay, meta.MetadataLevel5},
	}
}

// reconcileClusterFlags writes the flags the operator gave into the log
// where it holds no value yet, and warns of those it holds another
// value for.
func (a *Agent) reconcileClusterFlags(ctx context.Context) error {
	v := a.replica.View()
	f, err := v.Features()
	var cluster map[string]string
	if err == nil {
		cluster, err = v.BrokerConfigs("")
	}
	v.Close()
	if err != nil {
		return err
	}
	set := map[string]string{}
	for _, cf := range a.cfg.clusterFlags() {
		if !cf.set || f.MetadataLevel() < cf.level {
			continue
		}
		cur, ok := cluster[cf.config]
		switch {
		case !ok:
			set[cf.config] = cf.value
		case cur != cf.value:
			a.logger.Warn("a flag differs from the cluster-wide value in the log, which rules every agent; "+
				"change that with strand cluster config set (kafka-configs --entity-type brokers --entity-default), or drop the flag",
				"flag", cf.flag, "config", cf.config, "flag_value", cf.value, "cluster_value", cur)
		}
	}
	if len(set) == 0 {
		return nil
	}
	res, err := a.replica.Propose(ctx, meta.AlterBrokerConfigs{Set: set})
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		return fmt.Errorf("setting the cluster-wide %v from this agent's flags: %w", slices.Sorted(maps.Keys(set)), err)
	}
	a.logger.Info("set cluster-wide configs from this agent's flags: the log had none", "configs", set)
	return nil
}
