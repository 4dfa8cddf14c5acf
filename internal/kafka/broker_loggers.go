package kafka

// Broker loggers (KIP-412): the BROKER_LOGGER resource of an agent, its
// id as the name, lists its loggers (Deps.Loggers: root and one per
// component) with their levels, and IncrementalAlterConfigs SET changes
// one at once, DELETE returns it to the root's level. As in Kafka the
// change is the agent's alone and lasts until it restarts: it is not
// written to the log. Refusals are Kafka's: a resource that is not this
// agent's id, APPEND or SUBTRACT, or removing root's level is
// INVALID_REQUEST; an unknown logger or level INVALID_CONFIG.

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/loglevel"
)

// checkLoggerResource checks that name is this agent's id.
func (d *Deps) checkLoggerResource(name string) (*kerr.Error, string) {
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || int32(id) != d.Cluster.NodeID || strconv.Itoa(int(id)) != name {
		return kerr.InvalidRequest, fmt.Sprintf("Unexpected broker id, expected %d but received %s", d.Cluster.NodeID, name)
	}
	if d.Loggers == nil {
		return kerr.InvalidRequest, "this agent's log levels are fixed"
	}
	return nil, ""
}

// loggerConfigEntries describes the agent's loggers.
func loggerConfigEntries(l *loglevel.Levels, synonyms bool) []configResourceConfig {
	var out []configResourceConfig
	for _, lg := range l.Loggers() {
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		level := lg.Level
		rc.Name, rc.Value, rc.Source, rc.ConfigType = lg.Name, &level, kmsg.ConfigSourceDynamicBrokerLoggerConfig, kmsg.ConfigTypeString
		if synonyms {
			rc.ConfigSynonyms = append(rc.ConfigSynonyms, configSynonym(lg.Name, &level, rc.Source))
		}
		out = append(out, rc)
	}
	return out
}

// alterLoggers checks ops on BROKER_LOGGER resource name and, unless
// validateOnly, applies them: all or none.
func (d *Deps) alterLoggers(name string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) (*kerr.Error, string) {
	if e, msg := d.checkLoggerResource(name); e != nil {
		return e, msg
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Name] {
			return kerr.InvalidRequest, fmt.Sprintf("logger %q named twice", op.Name)
		}
		seen[op.Name] = true
		if !d.Loggers.Known(op.Name) {
			return kerr.InvalidConfig, fmt.Sprintf("Logger %s does not exist!", op.Name)
		}
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			v := ""
			if op.Value != nil {
				v = *op.Value
			}
			if _, err := loglevel.ParseLevel(v); err != nil {
				return kerr.InvalidConfig, fmt.Sprintf("Cannot set the log level of %s to %s: %v", op.Name, v, err)
			}
		case kmsg.IncrementalAlterConfigOpDelete:
			if op.Name == loglevel.Root {
				return kerr.InvalidRequest, "Removing the log level of the root logger is not allowed"
			}
		default:
			return kerr.InvalidRequest, fmt.Sprintf("%v operation is not allowed for the BROKER_LOGGER resource", op.Op)
		}
	}
	if validateOnly {
		return nil, ""
	}
	for _, op := range ops {
		var err error
		if op.Op == kmsg.IncrementalAlterConfigOpSet {
			err = d.Loggers.Set(op.Name, *op.Value)
		} else {
			err = d.Loggers.Reset(op.Name)
		}
		if err != nil {
			// Checked above; only a logger unknown since cannot be,
			// as loggers are never removed.
			return kerr.InvalidConfig, err.Error()
		}
	}
	return nil, ""
}
