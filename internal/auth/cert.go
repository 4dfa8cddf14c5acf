package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
)

// CertificatePrincipal is the principal of a client that presented cert
// on an SSL listener, as Kafka's default principal builder names it:
// User and the subject's distinguished name in RFC 2253 form, in the
// certificate's own attribute order ("User:CN=alice,OU=eng,O=Acme").
func CertificatePrincipal(cert *x509.Certificate) Principal {
	var seq pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &seq); err != nil || len(rest) > 0 {
		// The certificate parsed, so its subject did; this is only
		// belt and braces.
		return User(cert.Subject.String())
	}
	return User(seq.String())
}
