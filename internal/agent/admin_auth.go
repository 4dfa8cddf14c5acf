package agent

// Who may do what on the HTTP port. One decision, callerOf, names the
// caller of any request:
//
//   - the bearer token of --admin-token-file or STRAND_ADMIN_TOKEN is a
//     super user (tokenPrincipal);
//   - with --http-tls, a client certificate that chains to
//     --tls-client-ca-file is the principal the Kafka SSL listener gives
//     the same certificate (auth.CertificatePrincipal), and may do what
//     that principal may do over Kafka: a certificate the ACLs grant
//     nothing gets nothing here either;
//   - an agent given neither a token nor HTTP client certificates whose
//     HTTP listens on loopback only (the embedded default) takes a
//     request as a super user (loopbackPrincipal) when its Host names
//     this machine (localhost, a loopback address) or one of
//     --http-allowed-hosts and no proxy's header says it was forwarded.
//     Loopback is no credential on its own: a browser on this machine
//     reaches loopback for any web site's page, DNS rebinding gives such
//     a page a Host of its choosing, and a reverse proxy on this machine
//     reaches it for every client of the proxy.
//
// Each endpoint then asks what Kafka would ask of the principal
// (httpNeed): the mutating admin calls and the profiles under
// /debug/pprof/ need ALTER on the cluster, /v1/log/status DESCRIBE on
// the cluster, a topic's storage and compaction DESCRIBE on the topic,
// and the console a super user, since its Kafka requests run as one
// (console.go). /healthz, /readyz and /metrics stay open: they name no
// topic, group, record or agent address.
//
// A mutating call must also be one no page of another site can make
// from a browser without the agent's consent (which it never gives, as
// it answers no CORS preflight): Content-Type application/json, and no
// Origin but the request's own.
//
// The schema registry's listener (registry.go) names its callers by the
// same rules (callerOn, with its own address deciding the loopback
// default), and also takes HTTP basic auth as a SASL user.

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/certs"
)

// The principals of the callers that are super users without the
// authorizer's say. Their type is one no authentication produces, as
// for consolePrincipal, so no client can claim them.
var (
	tokenPrincipal    = auth.Principal{Type: "Strand", Name: "admin-token"}
	loopbackPrincipal = auth.Principal{Type: "Strand", Name: "loopback"}
)

// errNoAdminAuth refuses a caller on an agent that has no way to
// authenticate one and does not listen on loopback only.
var errNoAdminAuth = errors.New("this call on a non-loopback HTTP address needs --admin-token-file (or STRAND_ADMIN_TOKEN) or --http-tls with client certificates")

// httpCaller is who sent an HTTP request.
type httpCaller struct {
	principal auth.Principal
	// super: the admin token or the loopback default, which may do
	// anything whatever the authorizer says.
	super bool
	// host is the client's address, for ACLs that name one.
	host string
}

// httpNeed is what an endpoint asks of its caller, in Kafka's terms: an
// operation on a resource, or to be a super user.
type httpNeed struct {
	op        acl.Operation
	typ       acl.ResourceType
	name      string
	superUser bool
}

var (
	needClusterAlter    = httpNeed{op: kmsg.ACLOperationAlter, typ: kmsg.ACLResourceTypeCluster, name: acl.ClusterName}
	needClusterDescribe = httpNeed{op: kmsg.ACLOperationDescribe, typ: kmsg.ACLResourceTypeCluster, name: acl.ClusterName}
	needSuperUser       = httpNeed{superUser: true}
)

func (n httpNeed) String() string {
	if n.superUser {
		return "be a super user (--super-users)"
	}
	if n.typ == kmsg.ACLResourceTypeCluster {
		return n.op.String() + " the cluster"
	}
	return fmt.Sprintf("%v %s %s", n.op, acl.ResourceTypeName(n.typ), n.name)
}

// needTopicDescribe is the need of the GET endpoints that name a topic
// in their path ({name}).
func needTopicDescribe(r *http.Request) httpNeed {
	return httpNeed{op: kmsg.ACLOperationDescribe, typ: kmsg.ACLResourceTypeTopic, name: r.PathValue("name")}
}

// adminToken is the token a caller may bear, read at each call so a
// rotated token file takes effect at once; "" if none is configured.
func (a *Agent) adminToken() (string, error) {
	if a.cfg.AdminTokenFile == "" {
		return a.cfg.AdminToken, nil
	}
	b, err := os.ReadFile(a.cfg.AdminTokenFile)
	if err != nil {
		return "", fmt.Errorf("admin token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", errors.New("admin token file is empty")
	}
	return tok, nil
}

// ifAdmin lets h, a mutating admin call, run only for a caller that may
// ALTER the cluster, and only when a browser could not have sent it from
// another site's page.
func (a *Agent) ifAdmin(h http.HandlerFunc) http.HandlerFunc {
	guarded := a.ifAllowed(func(*http.Request) httpNeed { return needClusterAlter }, h)
	return func(w http.ResponseWriter, r *http.Request) {
		if code, err := checkMutation(r); err != nil {
			writeError(w, code, err)
			return
		}
		guarded(w, r)
	}
}

// ifAllowed lets h run only for a caller that has what need(r) names.
func (a *Agent) ifAllowed(need func(*http.Request) httpNeed, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if code, err := a.authorizeHTTP(r, need(r)); err != nil {
			if code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="strand admin"`)
			}
			writeError(w, code, err)
			return
		}
		h(w, r)
	}
}

// checkMutation refuses what a page of another site could send: a body
// other than JSON (an HTML form or a fetch without preflight can send
// text/plain, which would parse as JSON all the same, or nothing) and a
// foreign Origin.
func checkMutation(r *http.Request) (int, error) {
	if o := r.Header.Get("Origin"); o != "" && o != ownOrigin(r) {
		return http.StatusForbidden, fmt.Errorf("a call from the page of another origin (%s) is refused", o)
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return http.StatusUnsupportedMediaType, errors.New("a mutating call needs Content-Type: application/json, with or without a body")
	}
	return http.StatusOK, nil
}

func ownOrigin(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// authorizeHTTP decides whether r's caller has need: nil, or the HTTP
// status and error to refuse it with. The web console asks it too
// (console.Config.Authorize), so both decide alike.
func (a *Agent) authorizeHTTP(r *http.Request, need httpNeed) (int, error) {
	c, code, err := a.callerOf(r)
	if err != nil {
		return code, err
	}
	return a.permits(c, need, endpointHTTP, r.Method+" "+r.URL.Path)
}

// permits decides whether c has need: nil, or the HTTP status and
// error to refuse it with. A refusal by the authorizer goes to the
// authorization log as one on endpoint, for the request api; endpoint
// "" is a probe before the check that decides, which logs nothing.
func (a *Agent) permits(c httpCaller, need httpNeed, endpoint, api string) (int, error) {
	if c.super {
		return http.StatusOK, nil
	}
	if !a.ready.Load() {
		// The authorizer is the Kafka server's, which Start creates.
		return http.StatusServiceUnavailable, errors.New("agent not ready: its authorizer is not up yet")
	}
	az := a.server.Authorizer()
	switch {
	case az == nil:
		// Authorization is off: over Kafka the principal may do
		// everything, so here too.
		return http.StatusOK, nil
	case need.superUser && az.SuperUser(c.principal):
		return http.StatusOK, nil
	case !need.superUser && az.Authorize(acl.Request{Principal: c.principal, Host: c.host}, need.op, need.typ, need.name):
		return http.StatusOK, nil
	}
	if endpoint != "" && !need.superUser {
		a.denied(acl.Request{Principal: c.principal, Host: c.host}, need.op, need.typ, need.name, endpoint, api)
	}
	return http.StatusForbidden, fmt.Errorf("%v may not %v", c.principal, need)
}

// callerOf names the caller of r, a request to the HTTP port, or the
// HTTP status and error to refuse r with when it has none.
func (a *Agent) callerOf(r *http.Request) (httpCaller, int, error) { return a.callerOn(a.httpLn, r) }

// callerOn is callerOf for a request that came in on ln, whose address
// decides whether the loopback default applies.
func (a *Agent) callerOn(ln net.Listener, r *http.Request) (httpCaller, int, error) {
	host := ""
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		host = ap.Addr().Unmap().String()
	}
	want, err := a.adminToken()
	if err != nil {
		a.logger.Error("HTTP call refused: the admin token cannot be read", "err", err)
		return httpCaller{}, http.StatusInternalServerError, errors.New("the agent cannot read its admin token")
	}
	got, hasToken := bearerToken(r)
	if want != "" && hasToken {
		// Hashes first: ConstantTimeCompare returns at once on a
		// length mismatch, which would tell the token's length.
		gh, wh := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
		if subtle.ConstantTimeCompare(gh[:], wh[:]) != 1 {
			return httpCaller{}, http.StatusUnauthorized, errors.New("the bearer token is not the admin token")
		}
		return httpCaller{principal: tokenPrincipal, super: true, host: host}, http.StatusOK, nil
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return httpCaller{principal: auth.CertificatePrincipal(r.TLS.VerifiedChains[0][0]), host: host}, http.StatusOK, nil
	}
	if want != "" {
		return httpCaller{}, http.StatusUnauthorized, errors.New("a valid bearer token is required (Authorization: Bearer <token>)")
	}
	if !a.openOnLoopback(ln) {
		return httpCaller{}, http.StatusForbidden, errNoAdminAuth
	}
	if !a.allowedHost(r.Host) {
		return httpCaller{}, http.StatusForbidden, fmt.Errorf("Host %q names neither this machine nor one of --http-allowed-hosts: a loopback agent without a token takes no call addressed to another name, which a web page could have given (DNS rebinding)", r.Host)
	}
	if h := forwardedHeader(r); h != "" {
		return httpCaller{}, http.StatusForbidden, fmt.Errorf("the call came through a proxy (%s): a loopback agent behind a reverse proxy needs --admin-token-file, or it would take every client of the proxy as an admin", h)
	}
	if fromOtherSite(r) {
		return httpCaller{}, http.StatusForbidden, errors.New("a page of another site made this request: a loopback agent without a token takes none")
	}
	return httpCaller{principal: loopbackPrincipal, super: true, host: host}, http.StatusOK, nil
}

// openOnLoopback reports whether the loopback default applies to
// requests on ln: no HTTP client certificates are configured (the
// caller checked the token), and ln listens on a loopback address only.
func (a *Agent) openOnLoopback(ln net.Listener) bool {
	if ln == nil || (a.cfg.HTTPTLS && a.cfg.TLSClientCAFile != "") {
		return false
	}
	tcp, ok := ln.Addr().(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// allowedHost reports whether a request's Host (host or host:port) is a
// name of this machine no web site can give its own pages: localhost, a
// loopback address, or one of --http-allowed-hosts.
func (a *Agent) allowedHost(hostport string) bool {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if h == "localhost" {
		return true
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Unmap().IsLoopback()
	}
	for _, allowed := range strings.Split(a.cfg.HTTPAllowedHosts, ",") {
		if allowed = strings.TrimSpace(strings.ToLower(allowed)); allowed != "" && allowed == h {
			return true
		}
	}
	return false
}

// fromOtherSite reports whether a browser says a page of another site
// made r: a foreign Origin, or Sec-Fetch-Site cross-site for anything
// but a navigation (a user following a link to the console is fine; an
// image tag starting a CPU profile is not).
func fromOtherSite(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" && o != ownOrigin(r) {
		return true
	}
	return r.Header.Get("Sec-Fetch-Site") == "cross-site" && r.Header.Get("Sec-Fetch-Mode") != "navigate"
}

// forwardedHeader names the first header a reverse proxy adds that r
// carries, "" if none.
func forwardedHeader(r *http.Request) string {
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip"} {
		if r.Header.Get(h) != "" {
			return h
		}
	}
	return ""
}

func bearerToken(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// serveHTTPOverTLS wraps the HTTP listener in TLS (httpTLSConfig).
func (a *Agent) serveHTTPOverTLS() error {
	cfg, err := a.httpTLSConfig(endpointHTTP)
	if err != nil {
		return err
	}
	a.httpLn = tls.NewListener(a.httpLn, cfg)
	return nil
}

// httpTLSConfig is the TLS configuration of the HTTP port and of the
// schema registry's (registry.go): the agent's certificate, asking for
// (not requiring: /healthz and /metrics stay open to probes without
// one, and registry clients may use basic auth) a client certificate.
// One reloading certs.Server serves both; listener names the one asking,
// for the certificate expiry metric.
func (a *Agent) httpTLSConfig(listener string) (*tls.Config, error) {
	if a.httpTLS == nil {
		files, err := a.cfg.tlsFiles()
		if err != nil {
			return nil, err
		}
		if files.ClientCAFile != "" {
			files.ClientAuth = certs.ClientAuthRequested
		} else {
			files.ClientAuth = certs.ClientAuthNone
		}
		s, err := certs.NewServer(files, a.logger.With("component", "http-tls"))
		if err != nil {
			return nil, fmt.Errorf("http-tls: %w", err)
		}
		a.httpTLS = s
	}
	a.metrics.certs.watch(listener, a.httpTLS)
	return a.httpTLS.Config(), nil
}

// readSecretFile returns the first line of path, or "" for no path.
func readSecretFile(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimRight(line, "\r"); line == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return line, nil
}
