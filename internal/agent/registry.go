package agent

// The schema registry (package schemareg) on its own HTTP listener,
// Config.SchemaRegistryListen (`strand serve` defaults it to Confluent's
// port, 127.0.0.1:8081): Confluent Schema Registry's REST API over this
// agent's metadata copy, so every agent serves the same registry, reads
// from its own copy and writes through the log. With --http-tls it
// serves TLS with the HTTP port's certificate and client-CA rules
// (httpTLSConfig).
//
// Who calls (registryCaller):
//
//   - HTTP basic auth with a SCRAM user's name and password (the SASL
//     users, kafka.CheckPassword) is the principal User:<name>. A wrong
//     password or an unknown user is 401 with WWW-Authenticate: Basic
//     and Confluent's error code 40101, as Confluent's registry answers;
//   - without it, the HTTP port's rules name the caller (admin_auth.go,
//     callerOn): the admin bearer token is a super user, a verified
//     client certificate its principal, and an agent without a token or
//     client certificates whose registry listens on loopback only takes
//     a request as a super user when its Host is this machine, no proxy
//     forwarded it and no page of another site sent it.
//
// What the caller may do is what its principal may do over Kafka, on
// SUBJECT resources (acl.ResourceTypeSubject; package acl's doc has the
// mapping): super users anything, and with authorization off (no
// --authorizer) every authenticated caller everything, as on the Kafka
// port. The list of subjects, the schema types, the global config and
// mode and GET / are open to any authenticated caller.
//
// Browsers: a page of another site must not register or delete schemas
// with what a browser holds for this origin (basic credentials it
// remembers, a client certificate, the loopback default). A POST or PUT
// needs one of the JSON media types Confluent's clients send, which no
// HTML form or CORS-simple fetch can send, and no mutation may carry a
// foreign Origin. No CORS preflight is answered, so a page can send
// nothing else, nor read an answer.

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/kafka"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/schemareg"
)

// DefaultSchemaRegistryListen is `strand serve`'s registry address:
// Confluent's port, on loopback. Config's zero value is off, so that
// agents started from Go (tests, many to a machine) do not collide.
const DefaultSchemaRegistryListen = "127.0.0.1:8081"

// registryMediaTypes are the request bodies the registry takes, as
// Confluent's registry does: its own media types and JSON. None is one a
// form or a CORS-simple fetch can send.
var registryMediaTypes = map[string]bool{
	schemareg.ContentType:                 true,
	"application/vnd.schemaregistry+json": true,
	"application/json":                    true,
}

// registryCallerKey keys the request's httpCaller in its context: the
// caller is authenticated once per request (a password check derives a
// key), then every subject the request touches asks about it.
type registryCallerKey struct{}

// startRegistry serves the agent's registry (a.registry) on
// its listener. It runs once the Kafka server (whose authorizer it asks)
// exists; requests before the agent is ready are answered 503.
func (a *Agent) startRegistry() error {
	ln, err := net.Listen("tcp", a.cfg.SchemaRegistryListen)
	if err != nil {
		return fmt.Errorf("schema registry listen: %w", err)
	}
	if a.cfg.HTTPTLS {
		cfg, err := a.httpTLSConfig(endpointRegistry)
		if err != nil {
			ln.Close()
			return err
		}
		ln = tls.NewListener(ln, cfg)
	}
	a.registryLn = ln
	m := newRegistryMetrics(a.replica.View, a.logger.With("component", "schema-registry"))
	a.metrics.reg.MustRegister(m.collectors()...)
	a.registrySrv = &http.Server{
		Handler:           a.registryHandler(schemareg.Handler(a.registry, a.authorizeRegistry), m),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		if err := a.registrySrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.logger.Error("schema registry server", "err", err)
		}
	}()
	return nil
}

// RegistryAddr is the address the schema registry bound, or "" if it is
// off.
func (a *Agent) RegistryAddr() string {
	if a.registryLn == nil {
		return ""
	}
	return a.registryLn.Addr().String()
}

// registryHandler authenticates every request to api and refuses what a
// browser could send from another site, counting each request by
// endpoint and status.
func (a *Agent) registryHandler(api http.Handler, m *registryMetrics) http.Handler {
	// The endpoint is the API's route, found before the request is
	// served so that refusals count under it too.
	routes, _ := api.(interface {
		Handler(*http.Request) (http.Handler, string)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		endpoint := "unmatched"
		if routes != nil {
			if _, pattern := routes.Handler(r); pattern != "" {
				endpoint = pattern
			}
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() { m.observe(endpoint, sw.status, time.Since(start)) }()
		if r.Method == http.MethodOptions {
			// A CORS preflight: answered without any
			// Access-Control-Allow-* header, so the browser sends
			// nothing after it.
			registryError(sw, http.StatusMethodNotAllowed, 405, "OPTIONS is not served: this registry answers no CORS preflight")
			return
		}
		if !a.ready.Load() {
			registryError(sw, http.StatusServiceUnavailable, 50003, "agent not ready")
			return
		}
		if status, code, err := checkRegistryMutation(r); err != nil {
			registryError(sw, status, code, err.Error())
			return
		}
		c, status, err := a.registryCaller(r)
		if err != nil {
			if status == http.StatusUnauthorized {
				sw.Header().Set("WWW-Authenticate", `Basic realm="strand"`)
			}
			registryError(sw, status, registryCode(status), err.Error())
			return
		}
		api.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), registryCallerKey{}, c)))
	})
}

// checkRegistryMutation refuses a mutation a page of another site
// could have sent (checkBrowserMutation), with Confluent's error code.
func checkRegistryMutation(r *http.Request) (int, int32, error) {
	status, err := checkBrowserMutation(r, registryMediaTypes, false)
	if err == nil {
		return 0, 0, nil
	}
	if status == http.StatusForbidden {
		return status, 40301, err
	}
	return status, 415, fmt.Errorf("Content-Type %q: want %s or application/json", r.Header.Get("Content-Type"), schemareg.ContentType)
}

// checkBrowserMutation refuses a mutation a page of another site could
// have sent to a REST listener (the registry's, Connect's): a foreign
// Origin, or a POST or PUT body that is not one of mediaTypes (a
// form's, or text/plain, which would parse as JSON all the same). With
// bodyless, a PUT or POST without a body needs no media type, as
// Connect's curl scripts send none to /pause or /restart: no page can
// send a PUT cross-site without a preflight (never answered), and a
// bodyless POST is taken only when no browser sent it (no Origin, no
// cross-site Sec-Fetch-Site), since browsers send Origin with every
// cross-site POST.
func checkBrowserMutation(r *http.Request, mediaTypes map[string]bool, bodyless bool) (int, error) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return 0, nil
	}
	if o := r.Header.Get("Origin"); o != "" && o != ownOrigin(r) {
		return http.StatusForbidden, fmt.Errorf("a request from the page of another origin (%s) is refused", o)
	}
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		return 0, nil // DELETE: no body, and never sent cross-site without a preflight
	}
	if bodyless && r.ContentLength == 0 && r.Header.Get("Content-Type") == "" {
		if r.Method == http.MethodPut || (r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") != "cross-site") {
			return 0, nil
		}
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !mediaTypes[mt] {
		return http.StatusUnsupportedMediaType, fmt.Errorf("Content-Type %q: want application/json", r.Header.Get("Content-Type"))
	}
	return 0, nil
}

// errRegistryNoCredentials is the 401 of a request without any
// credential the registry could take.
var errRegistryNoCredentials = errors.New("authentication required: HTTP basic auth as a SASL (SCRAM) user, the admin bearer token, or a client certificate (with --http-tls)")

// registryCaller names r's caller: a basic-auth SCRAM user, else the
// HTTP port's rules applied to the registry's listener.
func (a *Agent) registryCaller(r *http.Request) (httpCaller, int, error) {
	return a.restCaller(a.registryLn, r)
}

// restCaller names the caller of r, which came in on ln, a REST
// listener (the registry's, Connect's): a basic-auth SCRAM user, else
// the HTTP port's rules applied to ln.
func (a *Agent) restCaller(ln net.Listener, r *http.Request) (httpCaller, int, error) {
	user, password, basic := r.BasicAuth()
	if !basic {
		c, status, err := a.callerOn(ln, r)
		switch {
		case errors.Is(err, errNoAdminAuth), status == http.StatusUnauthorized && r.Header.Get("Authorization") == "":
			// Basic auth would do: say so, as a 401 a client
			// can answer.
			return httpCaller{}, http.StatusUnauthorized, errRegistryNoCredentials
		}
		return c, status, err
	}
	ok, err := a.registryPasswords.check(a.replica, user, password)
	if err != nil {
		a.logger.Error("checking a basic-auth password", "err", err)
		return httpCaller{}, http.StatusInternalServerError, errors.New("the agent cannot check passwords now")
	}
	if !ok {
		// Unknown user and wrong password alike, as over SASL.
		return httpCaller{}, http.StatusUnauthorized, errors.New("invalid username or password")
	}
	host := ""
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		host = ap.Addr().Unmap().String()
	}
	return httpCaller{principal: auth.User(user), host: host}, http.StatusOK, nil
}

// maxVerifiedPasswords bounds verifiedPasswords: one entry per user.
const maxVerifiedPasswords = 1024

// verifiedPasswords remembers, per user, a password a request proved
// (kafka.CheckPassword) against the user's credentials as they were, so
// that the next request with it costs a hash instead of a SCRAM key
// derivation (thousands of HMACs, ~4ms: BenchmarkRegistryRead). Basic
// auth sends the password with every request, where SASL checks it
// once per connection. An entry is SHA-256 of the user's credentials
// (salts, iterations, stored keys) and the password: a changed or
// deleted credential no longer matches it. When full, an arbitrary
// entry makes room. Safe for concurrent use.
type verifiedPasswords struct {
	mu struct {
		sync.Mutex
		m map[string][sha256.Size]byte
	}
}

// check reports whether password is user's, from the cache or by
// kafka.CheckPassword.
func (vp *verifiedPasswords) check(db meta.Viewer, user, password string) (bool, error) {
	v := db.View()
	creds, err := v.ScramCredentials(user)
	v.Close()
	if err != nil {
		return false, err
	}
	h := sha256.New()
	for _, c := range creds {
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00%x\x00%x\x00", c.User, c.Mechanism, c.Iterations, c.Salt, c.StoredKey)
	}
	h.Write([]byte(password))
	var digest [sha256.Size]byte
	h.Sum(digest[:0])
	vp.mu.Lock()
	known, ok := vp.mu.m[user]
	vp.mu.Unlock()
	if ok && len(creds) > 0 && subtle.ConstantTimeCompare(known[:], digest[:]) == 1 {
		return true, nil
	}
	if ok, err := kafka.CheckPassword(db, user, password); !ok || err != nil {
		return false, err
	}
	vp.mu.Lock()
	defer vp.mu.Unlock()
	if vp.mu.m == nil {
		vp.mu.m = make(map[string][sha256.Size]byte)
	}
	if _, held := vp.mu.m[user]; !held && len(vp.mu.m) >= maxVerifiedPasswords {
		for u := range vp.mu.m {
			delete(vp.mu.m, u)
			break
		}
	}
	vp.mu.m[user] = digest
	return true, nil
}

// authorizeRegistry is the registry's schemareg.Authorize: what op on
// subject ("": the registry as a whole) needs of the caller the handler
// authenticated, in Kafka's terms.
func (a *Agent) authorizeRegistry(r *http.Request, op schemareg.Op, subject string) error {
	c, ok := r.Context().Value(registryCallerKey{}).(httpCaller)
	if !ok {
		return &schemareg.Error{Status: http.StatusInternalServerError, Code: 50001, Message: "request not authenticated"}
	}
	need, open := registryNeed(op, subject)
	if open {
		return nil
	}
	endpoint := endpointRegistry
	if schemareg.IsFiltering(r) {
		endpoint = "" // a listing leaves the subject out: no refusal to log
	}
	status, err := a.permits(c, need, endpoint, r.Method+" "+r.URL.Path)
	if err == nil {
		return nil
	}
	return &schemareg.Error{Status: status, Code: registryCode(status), Message: err.Error()}
}

// registryNeed is what op on subject needs (package acl's doc), or open:
// nothing beyond an authenticated caller.
func registryNeed(op schemareg.Op, subject string) (need httpNeed, open bool) {
	if subject == "" {
		if op == schemareg.OpRead {
			// The subject list (filtered subject by subject),
			// the schema types, the global config and mode.
			return httpNeed{}, true
		}
		return needClusterAlter, false
	}
	kop := map[schemareg.Op]acl.Operation{
		schemareg.OpRead:   kmsg.ACLOperationRead,
		schemareg.OpWrite:  kmsg.ACLOperationWrite,
		schemareg.OpDelete: kmsg.ACLOperationDelete,
		schemareg.OpAlter:  kmsg.ACLOperationAlter,
	}[op]
	return httpNeed{op: kop, typ: acl.ResourceTypeSubject, name: subject}, false
}

// registryCode is the Confluent error code of a refusal's status.
func registryCode(status int) int32 {
	switch status {
	case http.StatusUnauthorized:
		return 40101
	case http.StatusForbidden:
		return 40301
	case http.StatusServiceUnavailable:
		return 50003
	case http.StatusInternalServerError:
		return 50001
	}
	return int32(status)
}

// registryError answers as Confluent's registry does:
// {"error_code": code, "message": msg}.
func registryError(w http.ResponseWriter, status int, code int32, msg string) {
	w.Header().Set("Content-Type", schemareg.ContentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error_code": code, "message": msg})
}

// statusWriter records the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}
