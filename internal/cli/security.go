package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandkafka/strand/internal/certs"
)

// SecurityOptions are the client commands' TLS and SASL flags, each
// defaulting to its STRAND_<FLAG> environment variable, so scripts set
// them once. A password is best given by STRAND_SASL_PASSWORD or
// --sasl-password-file: a --sasl-password on the command line is
// visible to every user of the machine.
type SecurityOptions struct {
	// TLS turns TLS on with the system's CAs; any of the files turns
	// it on too.
	TLS     bool
	TLSCA   string
	TLSCert string
	TLSKey  string
	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty
	// means no SASL.
	SASLMechanism    string
	SASLUser         string
	SASLPassword     string
	SASLPasswordFile string
}

// envDefault is $STRAND_<NAME> for a flag, or def.
func envDefault(flag, def string) string {
	if v, ok := os.LookupEnv(envName(flag)); ok {
		return v
	}
	return def
}

func envName(flag string) string {
	return "STRAND_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Register adds the flags to fs.
func (o *SecurityOptions) Register(fs *pflag.FlagSet) {
	str := func(p *string, name, usage string) {
		fs.StringVar(p, name, envDefault(name, ""), usage+" (env "+envName(name)+")")
	}
	tlsDef := false
	if v := envDefault("tls", ""); v != "" {
		tlsDef = v == "1" || strings.EqualFold(v, "true")
	}
	fs.BoolVar(&o.TLS, "tls", tlsDef, "connect with TLS, trusting the system's CAs unless --tls-ca (env "+envName("tls")+")")
	str(&o.TLSCA, "tls-ca", "PEM file of the CAs the brokers' certificates must chain to; implies --tls")
	str(&o.TLSCert, "tls-cert", "PEM client certificate for mTLS; implies --tls")
	str(&o.TLSKey, "tls-key", "PEM private key of --tls-cert")
	str(&o.SASLMechanism, "sasl-mechanism", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	str(&o.SASLUser, "sasl-user", "SASL user name")
	str(&o.SASLPassword, "sasl-password", "SASL password; prefer the environment variable or --sasl-password-file")
	str(&o.SASLPasswordFile, "sasl-password-file", "file holding the SASL password (one line)")
}

// Opts returns the kgo options the flags ask for.
func (o *SecurityOptions) Opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if o.TLS || o.TLSCA != "" || o.TLSCert != "" || o.TLSKey != "" {
		cfg, err := certs.ClientConfig(certs.ClientFiles{CAFile: o.TLSCA, CertFile: o.TLSCert, KeyFile: o.TLSKey})
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUsage, err)
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	m, err := o.mechanism()
	if err != nil {
		return nil, err
	}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func (o *SecurityOptions) mechanism() (sasl.Mechanism, error) {
	if o.SASLMechanism == "" {
		if o.SASLUser != "" {
			return nil, fmt.Errorf("%w: --sasl-user needs --sasl-mechanism", ErrUsage)
		}
		return nil, nil
	}
	pass, err := o.password()
	if err != nil {
		return nil, err
	}
	if o.SASLUser == "" || pass == "" {
		return nil, fmt.Errorf("%w: --sasl-mechanism %s needs --sasl-user and a password", ErrUsage, o.SASLMechanism)
	}
	switch strings.ToUpper(o.SASLMechanism) {
	case "PLAIN":
		return plain.Auth{User: o.SASLUser, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: o.SASLUser, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: o.SASLUser, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("%w: --sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", ErrUsage, o.SASLMechanism)
}

// password is --sasl-password, or the first line of
// --sasl-password-file; both is a mistake.
func (o *SecurityOptions) password() (string, error) {
	if o.SASLPasswordFile == "" {
		return o.SASLPassword, nil
	}
	if o.SASLPassword != "" {
		return "", fmt.Errorf("%w: give --sasl-password or --sasl-password-file, not both", ErrUsage)
	}
	b, err := os.ReadFile(o.SASLPasswordFile)
	if err != nil {
		return "", fmt.Errorf("%w: --sasl-password-file: %v", ErrUsage, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimRight(line, "\r"), nil
}
