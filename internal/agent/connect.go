package agent

// Connectors (package connect): every agent runs the connectors the
// placement ring gives it ("connect:<name>" over the live agents, as SQL
// sinks are placed), and, with Config.ConnectListen (`strand serve`
// defaults it to Connect's port, 127.0.0.1:8083), serves Kafka
// Connect's REST API over its copy of the metadata.
//
// Callers are named as on the schema registry's listener (registry.go,
// restCaller): HTTP basic auth as a SCRAM user, the admin token, a
// verified client certificate (with --http-tls, which serves this
// listener TLS too), or the loopback default. What they may do is what
// their principal may do over Kafka on CONNECTOR resources
// (acl.ResourceTypeConnector; package acl's doc has the mapping).
//
// Browsers: no CORS preflight is answered, no mutation may carry a
// foreign Origin, and a request with a body needs Content-Type
// application/json (checkBrowserMutation). Connect's bodyless PUT
// /pause and POST /restart are taken without one, as curl sends them.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/console"
	"github.com/strandkafka/strand/internal/placement"
)

// DefaultConnectListen is `strand serve`'s Connect REST address:
// Connect's port, on loopback. Config's zero value is off.
const DefaultConnectListen = "127.0.0.1:8083"

// connectPrincipal is who the connectors' tasks act as on Kafka: a
// super user, of a type no client can claim.
var connectPrincipal = auth.Principal{Type: "Strand", Name: "connect"}

var connectMediaTypes = map[string]bool{"application/json": true}

// connectCallerKey keys the request's httpCaller in its context.
type connectCallerKey struct{}

// newConnect makes the connectors' runner; startConnect runs it and the
// REST API once the agent is ready.
func (a *Agent) newConnect() error {
	classes := connect.Classes(append(connectClasses(a), a.cfg.testing.connectClasses...)...)
	a.connectSecrets = connect.NewSecrets(a.store)
	a.connectMetrics = connect.NewMetrics()
	a.metrics.reg.MustRegister(a.connectMetrics.Collectors()...)
	r, err := connect.NewRunner(connect.Config{
		Store: a.replica, Classes: classes, Secrets: a.connectSecrets,
		Dir: filepath.Join(a.cfg.DataDir, "connect"), Kafka: a.connectKafka,
		Owner: a.connectOwner, Self: a.cfg.NodeID, Worker: a.connectWorker(a.cfg.NodeID),
		Metrics: a.connectMetrics, Logger: a.logger.With("component", "connect"),
		Authorize: a.connectAuthorize,
	})
	if err != nil {
		return err
	}
	a.connectRunner, a.connectClasses = r, classes
	return nil
}

// connectManager is the SQL endpoint's way to the connectors: what the
// REST API does, over the same metadata, classes and secrets.
func (a *Agent) connectManager() *connect.Manager {
	if a.connectRunner == nil {
		return nil
	}
	return connect.NewManager(connect.ManagerConfig{Store: a.replica, Classes: a.connectClasses, Secrets: a.connectSecrets, Placed: a.connectPlaced})
}

// connectOwner is the node id of the agent that runs the connector of
// key, read at each call: the membership starts after newConnect.
func (a *Agent) connectOwner(key string) int32 {
	return placement.Ring{Self: a.cfg.NodeID, Live: a.members.nodes}.Owner(key)
}

// connectAuthorize is connect.Config.Authorize: whether the connector's
// owner may do op on topic over Kafka, decided as for a SQL session
// (authorizeSQL): an owner the HTTP port took as a super user (the admin
// token, the loopback default) may do anything, anyone else what the
// Kafka server's authorizer allows.
func (a *Agent) connectAuthorize(owner string, op acl.Operation, topic string) error {
	p, err := auth.ParsePrincipal(owner)
	if err != nil {
		return fmt.Errorf("the connector's owner %q: %w", owner, err)
	}
	ok, err := a.authorizeSQL(acl.Request{Principal: p}, op, kmsg.ACLResourceTypeTopic, topic)
	switch {
	case err != nil:
		return err
	case !ok:
		a.denied(acl.Request{Principal: p}, op, kmsg.ACLResourceTypeTopic, topic, endpointConnect, "connector task")
		return fmt.Errorf("%v, the connector's owner, may not %v topic %q: %w", p, op, topic, kerr.TopicAuthorizationFailed)
	}
	return nil
}

// connectPlaced is connect.APIConfig.Placed: the agent the ring places
// the connector on now, and its worker id.
func (a *Agent) connectPlaced(name string) (int32, string) {
	node := a.connectOwner(connect.PlacementKey(name))
	return node, a.connectWorker(node)
}

// connectKafka is connect.Env.Kafka: a client of this agent, in process,
// as connectPrincipal.
func (a *Agent) connectKafka() []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(a.kafkaLn.Addr().String()),
		kgo.Dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
			return a.inProcessDial(ctx, network, addr, connectPrincipal)
		}),
	}
}

// connectWorker is the worker_id of agent node: its advertised host
// (this agent's: its first listener's) with this agent's Connect port.
// Agents of one cluster are expected to serve Connect on one port, as
// Connect's workers do; until a task reports, the status names the
// placed agent this way.
func (a *Agent) connectWorker(node int32) string {
	port := ""
	if _, p, err := net.SplitHostPort(a.cfg.ConnectListen); err == nil {
		port = p
	}
	if a.connectLn != nil {
		port = strconv.Itoa(a.connectLn.Addr().(*net.TCPAddr).Port)
	}
	host := ""
	if node == a.cfg.NodeID {
		host = a.listeners[0].endpoint.Host
		if host == "" {
			host, _, _ = net.SplitHostPort(a.cfg.ConnectListen)
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			// A wildcard bind advertises no address: the machine's
			// name is the best a caller can use.
			host, _ = os.Hostname()
		}
	} else {
		v := a.replica.View()
		agents, err := v.LiveAgents()
		v.Close()
		if err != nil {
			return ""
		}
		for _, ag := range agents {
			if ag.NodeID == node {
				host = ag.Host
			}
		}
	}
	if host == "" || port == "" {
		return ""
	}
	return net.JoinHostPort(host, port)
}

// startConnect runs the connectors this agent owns and, with
// ConnectListen, serves the REST API.
func (a *Agent) startConnect() error {
	if a.connectRunner == nil {
		return nil
	}
	if a.cfg.ConnectListen != "" {
		ln, err := net.Listen("tcp", a.cfg.ConnectListen)
		if err != nil {
			return fmt.Errorf("connect listen: %w", err)
		}
		if a.cfg.HTTPTLS {
			cfg, err := a.httpTLSConfig(endpointConnect)
			if err != nil {
				ln.Close()
				return err
			}
			ln = tls.NewListener(ln, cfg)
		}
		a.connectLn = ln
		_, revision := buildVersion()
		api := connect.NewAPI(connect.APIConfig{
			Store: a.replica, Classes: a.connectClasses, Secrets: a.connectSecrets,
			Authorize: a.authorizeConnect,
			Principal: func(r *http.Request) string {
				c, _ := r.Context().Value(connectCallerKey{}).(httpCaller)
				return c.principal.String()
			},
			Placed: a.connectPlaced,
			Commit: revision,
		})
		m := newConnectHTTPMetrics()
		a.metrics.reg.MustRegister(m.requests, m.latency)
		a.connectSrv = &http.Server{Handler: a.connectHandler(api, m), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := a.connectSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.logger.Error("connect server", "err", err)
			}
		}()
	}
	a.connectRunner.SetWorker(a.connectWorker(a.cfg.NodeID))
	ctx, cancel := context.WithCancel(context.Background())
	a.connectStop, a.connectDone = cancel, make(chan struct{})
	go func() {
		defer close(a.connectDone)
		a.connectRunner.Run(ctx)
	}()
	return nil
}

// stopConnect stops the REST API and the tasks, before the Kafka server
// their clients use and the replica they propose through.
func (a *Agent) stopConnect(ctx context.Context) error {
	var err error
	if a.connectSrv != nil {
		err = a.connectSrv.Shutdown(ctx)
	}
	if a.connectStop != nil {
		a.connectStop()
		<-a.connectDone
	}
	return err
}

// ConnectAddr is the address the Connect REST API bound, or "" if it is
// off.
func (a *Agent) ConnectAddr() string {
	if a.connectLn == nil {
		return ""
	}
	return a.connectLn.Addr().String()
}

// connectHTTPMetrics count the Connect API's requests, as the registry's
// are (metrics_registry.go).
type connectHTTPMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newConnectHTTPMetrics() *connectHTTPMetrics {
	return &connectHTTPMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strand_connect_http_requests_total",
			Help: "Connect REST API requests, by endpoint (the route of Connect's API, \"unmatched\" for none) and HTTP status code.",
		}, []string{"endpoint", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strand_connect_http_request_seconds",
			Help:    "Time to answer a Connect REST API request, by endpoint; a change includes its round trip through the log.",
			Buckets: latencyBuckets,
		}, []string{"endpoint"}),
	}
}

// connectHandler authenticates every request to api and refuses what
// a browser could send from another site, counting each request by
// endpoint and status.
func (a *Agent) connectHandler(api *connect.API, m *connectHTTPMetrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		endpoint := "unmatched"
		if _, pattern := api.Handler(r); pattern != "" && pattern != "/" {
			endpoint = pattern
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			m.requests.WithLabelValues(endpoint, strconv.Itoa(sw.status)).Inc()
			m.latency.WithLabelValues(endpoint).Observe(time.Since(start).Seconds())
		}()
		w = sw
		if r.Method == http.MethodOptions {
			connect.WriteError(w, http.StatusMethodNotAllowed, "OPTIONS is not served: this API answers no CORS preflight")
			return
		}
		if !a.ready.Load() {
			connect.WriteError(w, http.StatusServiceUnavailable, "agent not ready")
			return
		}
		if status, err := checkBrowserMutation(r, connectMediaTypes, true); err != nil {
			connect.WriteError(w, status, err.Error())
			return
		}
		c, status, err := a.restCaller(a.connectLn, r)
		if err != nil {
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Basic realm="strand"`)
			}
			connect.WriteError(w, status, err.Error())
			return
		}
		api.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), connectCallerKey{}, c)))
	})
}

// authorizeConnect is connect.APIConfig.Authorize: op on the connector
// name, CREATE on the cluster or the name.
func (a *Agent) authorizeConnect(r *http.Request, op acl.Operation, name string) *connect.Error {
	c, ok := r.Context().Value(connectCallerKey{}).(httpCaller)
	if !ok {
		return &connect.Error{Status: http.StatusInternalServerError, Message: "request not authenticated"}
	}
	if op == kmsg.ACLOperationCreate {
		if _, err := a.permits(c, httpNeed{op: op, typ: kmsg.ACLResourceTypeCluster, name: acl.ClusterName}, "", ""); err == nil {
			return nil
		}
	}
	endpoint := endpointConnect
	if connect.IsFiltering(r) {
		endpoint = "" // a listing leaves the connector out: no refusal to log
	}
	status, err := a.permits(c, httpNeed{op: op, typ: acl.ResourceTypeConnector, name: name}, endpoint, r.Method+" "+r.URL.Path)
	if err != nil {
		return &connect.Error{Status: status, Message: err.Error()}
	}
	return nil
}

// consoleConnectors is console.Config.Connectors: the connectors with
// their status, from this agent's copy. The console's caller is a super
// user (it asks for one), so it lists every connector.
func (a *Agent) consoleConnectors(*http.Request) ([]console.Connector, error) {
	v := a.replica.View()
	conns, err := v.Connectors()
	v.Close()
	if err != nil {
		return nil, err
	}
	out := make([]console.Connector, 0, len(conns))
	for _, c := range conns {
		st := connect.StatusOf(c, a.connectClasses, a.connectPlaced)
		cc := console.Connector{Name: c.Name, Class: c.Config["connector.class"], Type: string(st.Type),
			State: st.Connector.State, Worker: st.Connector.WorkerID}
		if len(st.Tasks) > 0 {
			cc.TaskState, cc.Trace = st.Tasks[0].State, st.Tasks[0].Trace
		}
		out = append(out, cc)
	}
	return out, nil
}
