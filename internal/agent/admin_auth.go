package agent

// Who may call the admin API's mutating endpoints (migrating the shared
// log, snapshots, storage verification) and the profiles under
// /debug/pprof/ (pprof.go): a client presenting the bearer
// token of --admin-token-file or STRAND_ADMIN_TOKEN, or, with
// --http-tls, a client certificate that chains to --tls-client-ca-file.
// /healthz, /readyz, /metrics and the other GET endpoints stay open. An
// agent given neither a token nor HTTP client certificates keeps the
// embedded default: admin calls are taken on a loopback HTTP address,
// where only this machine reaches them, and refused on any other.

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/strandkafka/strand/internal/certs"
)

// errNoAdminAuth refuses a mutating call on a non-loopback HTTP address
// when no way to authenticate was configured.
var errNoAdminAuth = errors.New("admin calls on a non-loopback HTTP address need --admin-token-file (or STRAND_ADMIN_TOKEN) or --http-tls with client certificates")

// adminToken is the token a mutating call must bear, read at each call
// so a rotated token file takes effect at once; "" if none is
// configured.
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

// ifAdmin lets h run only for an authenticated caller.
func (a *Agent) ifAdmin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		code, err := a.checkAdmin(r)
		if err != nil {
			if code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="strand admin"`)
			}
			writeError(w, code, err)
			return
		}
		h(w, r)
	}
}

// checkAdmin decides whether r comes from an authenticated caller: nil,
// or the HTTP status and error to refuse it with. The web console asks
// it too (console.Config.Authorize), so both decide alike.
func (a *Agent) checkAdmin(r *http.Request) (int, error) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return http.StatusOK, nil
	}
	want, err := a.adminToken()
	if err != nil {
		a.logger.Error("admin call refused: the token cannot be read", "err", err)
		return http.StatusInternalServerError, errors.New("the agent cannot read its admin token")
	}
	if want == "" {
		if a.adminOpenOnLoopback() {
			return http.StatusOK, nil
		}
		return http.StatusForbidden, errNoAdminAuth
	}
	got, ok := bearerToken(r)
	// Hashes first: ConstantTimeCompare returns at once on a length
	// mismatch, which would tell the token's length.
	gh, wh := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	if !ok || subtle.ConstantTimeCompare(gh[:], wh[:]) != 1 {
		return http.StatusUnauthorized, errors.New("a valid bearer token is required (Authorization: Bearer <token>)")
	}
	return http.StatusOK, nil
}

// adminOpenOnLoopback reports whether unauthenticated mutating calls
// are taken: no token and no HTTP client certificates are configured,
// and HTTP listens on a loopback address only.
func (a *Agent) adminOpenOnLoopback() bool {
	if a.httpLn == nil || (a.cfg.HTTPTLS && a.cfg.TLSClientCAFile != "") {
		return false
	}
	tcp, ok := a.httpLn.Addr().(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

func bearerToken(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// serveHTTPOverTLS wraps the HTTP listener in TLS with the agent's
// certificate, asking for (not requiring: /healthz and /metrics stay
// open to probes without one) a client certificate.
func (a *Agent) serveHTTPOverTLS() error {
	files, err := a.cfg.tlsFiles()
	if err != nil {
		return err
	}
	if files.ClientCAFile != "" {
		files.ClientAuth = certs.ClientAuthRequested
	} else {
		files.ClientAuth = certs.ClientAuthNone
	}
	s, err := certs.NewServer(files, a.logger.With("component", "http-tls"))
	if err != nil {
		return fmt.Errorf("http-tls: %w", err)
	}
	a.httpLn = tls.NewListener(a.httpLn, s.Config())
	return nil
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
