package kafka

import (
	"crypto/tls"
	"fmt"

	"github.com/strandkafka/strand/internal/auth"
)

// Listener describes one listener, as Kafka's listeners setting names
// them: "SASL_SSL://0.0.0.0:9093" is the listener SASL_SSL speaking
// SASL over TLS. Its name is what advertised addresses are keyed by;
// its protocol says whether connections must authenticate.
type Listener struct {
	Name     string
	Protocol auth.SecurityProtocol
	// TLS serves the protocols that run over TLS (SSL, SASL_SSL) and
	// must be nil for the others. The handshake runs on the
	// connection's goroutine, bounded by Config.TLSHandshakeTimeout; a
	// failed one closes the connection with ErrTLSHandshake. On SSL a
	// client certificate's subject becomes the principal
	// (auth.CertificatePrincipal).
	TLS *tls.Config
	// Zone, when set, is the zone of every client of this listener
	// (per-zone listeners, zones.go): it wins over what the client
	// says.
	Zone string
}

// check reports a listener whose TLS does not match its protocol.
func (l Listener) check() error {
	switch {
	case l.Protocol.TLS() && l.TLS == nil:
		return fmt.Errorf("kafka: listener %s (%v) needs a TLS config", l.Name, l.Protocol)
	case !l.Protocol.TLS() && l.TLS != nil:
		return fmt.Errorf("kafka: listener %s (%v) does not run over TLS", l.Name, l.Protocol)
	}
	return nil
}

// PlaintextListener is what Serve and ServeConn use: no TLS, no SASL,
// every client auth.Anonymous.
var PlaintextListener = Listener{Name: "PLAINTEXT", Protocol: auth.Plaintext}
