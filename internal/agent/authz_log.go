package agent

// The authorization log (package authzlog) of this agent: the Kafka
// server writes its refusals to it (kafka.ACLConfig.Denials), and so do
// the endpoints that ask the same authorizer: the HTTP port's admin API
// and console, the schema registry, Kafka Connect's REST API and the
// connectors' topic rights, and SQL sessions. Every refusal is counted
// in strand_authorization_denials_total.

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/authzlog"
	"github.com/strandkafka/strand/internal/clock"
)

// Endpoint names the authorization log gives the listeners that are not
// Kafka's (a Kafka listener is named by its own name).
const (
	endpointHTTP     = "http"
	endpointRegistry = "schema-registry"
	endpointConnect  = "connect"
	endpointSQL      = "sql"
)

// newDenialLog makes the agent's authorization log and registers its
// counter.
func (a *Agent) newDenialLog(clk clock.Clock) *authzlog.Log {
	denials := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strand_authorization_denials_total",
		Help: "Requests the authorizer refused, on the Kafka listeners and on the HTTP, schema registry, Connect and SQL endpoints, by operation and resource type (each refusal is also written, rate-limited, by the logger kafka.authorizer.logger).",
	}, []string{"operation", "resource_type"})
	a.metrics.reg.MustRegister(denials)
	return authzlog.New(authzlog.Logger(a.logger), clk, func(d authzlog.Decision) {
		denials.WithLabelValues(d.Operation.String(), acl.ResourceTypeName(d.ResourceType)).Inc()
	})
}

// denied records a refusal by the Kafka server's authorizer on one of
// the agent's own endpoints. api says what was asked (an HTTP method
// and path, a SQL statement's kind), "" when unknown.
func (a *Agent) denied(r acl.Request, op acl.Operation, typ acl.ResourceType, name, endpoint, api string) {
	a.denials.Denied(authzlog.Decision{Request: r, Operation: op, ResourceType: typ, Name: name, Listener: endpoint, API: api}, func() string {
		if az := a.server.Authorizer(); az != nil {
			return az.Why(r, op, typ, name)
		}
		return ""
	})
}
