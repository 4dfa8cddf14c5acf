package agent

import (
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
)

// pprofPrefix is where the Go runtime's profiles are served on the HTTP
// address (go tool pprof http://host:9644/debug/pprof/heap).
const pprofPrefix = "/debug/pprof/"

// mountPprof serves net/http/pprof to callers that may ALTER the
// cluster (admin_auth.go): a profile names the agent's code paths and
// /cmdline its flags, and a CPU profile or trace costs CPU while it
// runs. They are served before the agent is ready (to the token and
// the loopback default; a certificate's principal waits for the
// authorizer): a slow start is worth profiling.
func (a *Agent) mountPprof(mux *http.ServeMux) {
	need := func(*http.Request) httpNeed { return needClusterAlter }
	mux.HandleFunc(pprofPrefix, a.ifAllowed(need, pprof.Index))
	mux.HandleFunc(pprofPrefix+"cmdline", a.ifAllowed(need, serveCmdline))
	mux.HandleFunc(pprofPrefix+"profile", a.ifAllowed(need, pprof.Profile))
	mux.HandleFunc(pprofPrefix+"symbol", a.ifAllowed(need, pprof.Symbol))
	mux.HandleFunc(pprofPrefix+"trace", a.ifAllowed(need, pprof.Trace))
}

// serveCmdline is pprof.Cmdline with the URLs' secrets redacted. No
// secret belongs on a command line (every user of the machine can read
// it in /proc; the flags take them from files and the environment), but
// a --log or --objstore URL with a password in it still works, and this
// page must not be where it leaks from.
func serveCmdline(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte(strings.Join(redactArgs(os.Args), "\x00")))
}

// redactArgs returns args with every URL shown as RedactURL shows it,
// whether it is an argument of its own or a --flag=value's value.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, arg := range args {
		out[i] = arg
		if flag, value, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(flag, "-") && strings.Contains(value, "://") {
			out[i] = flag + "=" + RedactURL(value)
		} else if strings.Contains(arg, "://") {
			out[i] = RedactURL(arg)
		}
	}
	return out
}
