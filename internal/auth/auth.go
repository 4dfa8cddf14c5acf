// Package auth owns who a client is: the principal a connection
// authenticated as and the security protocols a listener speaks. The
// Kafka server sets a connection's principal (from a client certificate
// or a SASL exchange); authorization, quotas and logs read it.
package auth

import (
	"fmt"
	"strings"
)

// Principal is a Kafka principal, "User:alice". Kafka's principal type
// for every built-in mechanism is "User".
type Principal struct {
	Type string
	Name string
}

// PrincipalTypeUser is the type of every principal Kafka's built-in
// authentication produces.
const PrincipalTypeUser = "User"

// Anonymous is the principal of a connection that did not authenticate
// (a PLAINTEXT or SSL listener without a client certificate), as Kafka
// names it.
var Anonymous = Principal{Type: PrincipalTypeUser, Name: "ANONYMOUS"}

// User returns the principal User:name.
func User(name string) Principal { return Principal{Type: PrincipalTypeUser, Name: name} }

// String formats p as Kafka does: "User:alice".
func (p Principal) String() string { return p.Type + ":" + p.Name }

// ParsePrincipal parses "Type:Name" (ACL bindings, --super-users).
func ParsePrincipal(s string) (Principal, error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok || typ == "" || name == "" {
		return Principal{}, fmt.Errorf("auth: principal %q is not Type:Name", s)
	}
	return Principal{Type: typ, Name: name}, nil
}

// SecurityProtocol is a listener's protocol, Kafka's
// security.protocol.
type SecurityProtocol uint8

const (
	Plaintext SecurityProtocol = iota
	SSL
	SASLPlaintext
	SASLSSL
)

var protocolNames = [...]string{
	Plaintext:     "PLAINTEXT",
	SSL:           "SSL",
	SASLPlaintext: "SASL_PLAINTEXT",
	SASLSSL:       "SASL_SSL",
}

// String is Kafka's name for p.
func (p SecurityProtocol) String() string {
	if int(p) < len(protocolNames) {
		return protocolNames[p]
	}
	return fmt.Sprintf("SecurityProtocol(%d)", uint8(p))
}

// ParseSecurityProtocol parses Kafka's name for a protocol, in any case.
func ParseSecurityProtocol(s string) (SecurityProtocol, error) {
	for p, n := range protocolNames {
		if strings.EqualFold(s, n) {
			return SecurityProtocol(p), nil
		}
	}
	return 0, fmt.Errorf("auth: unknown security protocol %q (want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", s)
}

// TLS reports whether the protocol runs over TLS.
func (p SecurityProtocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether a client must authenticate with SASL before any
// request other than ApiVersions and the SASL APIs.
func (p SecurityProtocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }
