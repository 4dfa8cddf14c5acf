package kafka

import "github.com/strandkafka/strand/internal/auth"

// Listener describes one listener, as Kafka's listeners setting names
// them: "SASL_SSL://0.0.0.0:9093" is the listener SASL_SSL speaking
// SASL over TLS. Its name is what advertised addresses are keyed by;
// its protocol says whether connections must authenticate.
type Listener struct {
	Name     string
	Protocol auth.SecurityProtocol
}

// PlaintextListener is what Serve and ServeConn use: no TLS, no SASL,
// every client auth.Anonymous.
var PlaintextListener = Listener{Name: "PLAINTEXT", Protocol: auth.Plaintext}
