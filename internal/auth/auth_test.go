package auth

import (
	"crypto/x509/pkix"
	"testing"

	"github.com/strandkafka/strand/internal/certs/certstest"
)

func TestParse(t *testing.T) {
	p, err := ParsePrincipal("User:alice")
	if err != nil || p != User("alice") || p.String() != "User:alice" {
		t.Fatalf("ParsePrincipal = %v, %v", p, err)
	}
	for _, bad := range []string{"alice", ":alice", "User:"} {
		if _, err := ParsePrincipal(bad); err == nil {
			t.Errorf("ParsePrincipal(%q) accepted", bad)
		}
	}
	for _, s := range []string{"PLAINTEXT", "ssl", "SASL_PLAINTEXT", "sasl_ssl"} {
		sp, err := ParseSecurityProtocol(s)
		if err != nil {
			t.Fatalf("ParseSecurityProtocol(%q): %v", s, err)
		}
		if (sp.TLS() != (sp == SSL || sp == SASLSSL)) || (sp.SASL() != (sp == SASLPlaintext || sp == SASLSSL)) {
			t.Errorf("%v: TLS %v SASL %v", sp, sp.TLS(), sp.SASL())
		}
	}
	if _, err := ParseSecurityProtocol("SSL_SASL"); err == nil {
		t.Error("unknown protocol accepted")
	}
}

func TestCertificatePrincipal(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	for _, tc := range []struct {
		subject pkix.Name
		want    string
	}{
		{pkix.Name{CommonName: "alice"}, "User:CN=alice"},
		{pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Acme, Inc"}, Country: []string{"US"}},
			`User:CN=alice,OU=eng,O=Acme\, Inc,C=US`},
	} {
		p := ca.Client(t, "c", tc.subject)
		if got := CertificatePrincipal(p.Cert).String(); got != tc.want {
			t.Errorf("%v: principal %q, want %q", tc.subject, got, tc.want)
		}
	}
}
