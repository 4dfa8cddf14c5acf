package agent

import (
	"net/http"
	"net/http/pprof"
)

// pprofPrefix is where the Go runtime's profiles are served on the HTTP
// address (go tool pprof http://host:9644/debug/pprof/heap).
const pprofPrefix = "/debug/pprof/"

// mountPprof serves net/http/pprof behind the admin authentication
// (admin_auth.go): a profile names the agent's code paths and
// /cmdline its flags, and a CPU profile or trace costs CPU while it
// runs, so an unauthenticated caller off loopback gets none. They are
// served before the agent is ready: a slow start is worth profiling.
func (a *Agent) mountPprof(mux *http.ServeMux) {
	mux.HandleFunc(pprofPrefix, a.ifAdmin(pprof.Index))
	mux.HandleFunc(pprofPrefix+"cmdline", a.ifAdmin(pprof.Cmdline))
	mux.HandleFunc(pprofPrefix+"profile", a.ifAdmin(pprof.Profile))
	mux.HandleFunc(pprofPrefix+"symbol", a.ifAdmin(pprof.Symbol))
	mux.HandleFunc(pprofPrefix+"trace", a.ifAdmin(pprof.Trace))
}
