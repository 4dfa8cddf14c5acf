package auth

import "testing"

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
