package compat

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandkafka/strand/internal/certs"
	"github.com/strandkafka/strand/internal/certs/certstest"
)

// securityCount is how many records each security check produces and
// reads back: the check is that the client authenticates and moves
// records, not throughput.
const securityCount = 100

// secUser is the SCRAM user every secured check authenticates as: the
// agent's bootstrap user.
const secUser = "compat"

// securityCase is how one security column is exercised: the listener's
// protocol and the SASL mechanism, if any.
type securityCase struct {
	protocol, mechanism string
}

// securityCases: the acceptance of issue 14 asks for SCRAM-SHA-512 over
// SASL_SSL, PLAIN over SASL_PLAINTEXT and mTLS; SCRAM-SHA-256 rides on
// SASL_PLAINTEXT.
var securityCases = map[Capability]securityCase{
	SASLPlain:   {"SASL_PLAINTEXT", "PLAIN"},
	ScramSHA256: {"SASL_PLAINTEXT", "SCRAM-SHA-256"},
	ScramSHA512: {"SASL_SSL", "SCRAM-SHA-512"},
	MTLS:        {"SSL", ""},
}

func (c securityCase) String() string {
	if c.mechanism == "" {
		return c.protocol + " with a client certificate"
	}
	return c.protocol + " " + c.mechanism
}

// Security is the secured side of a run: a throwaway CA, the agent's
// certificate, a client certificate and the SCRAM user's password.
type Security struct {
	User, Password string
	CAFile         string
	Server, Client certstest.Pair
	passwordFile   string
	// Addrs maps PLAINTEXT, SASL_PLAINTEXT, SASL_SSL and SSL to the
	// agent's listeners once it runs.
	Addrs map[string]string
}

// NewSecurity writes the CA, certificates and password file into dir.
func NewSecurity(dir string) (*Security, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := certstest.NewCAIn(dir, "compat")
	if err != nil {
		return nil, err
	}
	s := &Security{User: secUser, Password: "compat-" + randomSuffix(), CAFile: ca.CertFile,
		passwordFile: filepath.Join(dir, "bootstrap-password")}
	if s.Server, err = ca.Sign("agent", pkix.Name{CommonName: "localhost"}, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if s.Client, err = ca.Sign("client", pkix.Name{CommonName: "compat-client"}, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	return s, os.WriteFile(s.passwordFile, []byte(s.Password+"\n"), 0o600)
}

// AgentArgs are the `strand serve` flags for a PLAINTEXT listener (the
// runner's own checks and the unsecured columns) and one listener of
// each secured protocol. Client certificates are required, as an mTLS
// deployment would: the SASL_SSL clients present the same one.
func (s *Security) AgentArgs() []string {
	return []string{
		"--listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
		"--tls-cert-file", s.Server.CertFile, "--tls-key-file", s.Server.KeyFile,
		"--tls-client-ca-file", s.CAFile, "--tls-client-auth", "required",
		"--sasl-bootstrap-user", s.User, "--sasl-bootstrap-password-file", s.passwordFile,
	}
}

// setAddrs takes the listener addresses from the running agent.
func (s *Security) setAddrs(a *Agent) error {
	for _, p := range []string{"PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL"} {
		if a.Listeners[p] == "" {
			return fmt.Errorf("the agent's serving line names no %s listener (have %v)", p, a.Listeners)
		}
	}
	s.Addrs = a.Listeners
	return nil
}

// kgoEnv un-skips the kgo suite's SCRAM tests with SCRAM-SHA-512 over
// the SASL_PLAINTEXT listener (the suite dials them without TLS).
func (s *Security) kgoEnv() []string {
	return []string{"KGO_TEST_SCRAM=" + s.User + ":" + s.Password + ":512", "KGO_TEST_SCRAM_SEEDS=" + s.Addrs["SASL_PLAINTEXT"]}
}

// kgoVariants are the suite's extra runs for caps: its SCRAM tests
// with SCRAM-SHA-256, and a few produce, consume and admin tests with
// every client (the suite's admin one too) dialing the SSL listener
// with the client certificate (KGO_TEST_TLS).
func (s *Security) kgoVariants(caps []Capability) []KgoVariant {
	var vs []KgoVariant
	if slices.Contains(caps, ScramSHA256) {
		vs = append(vs, KgoVariant{Name: "KGO_TEST_SCRAM SCRAM-SHA-256", Cap: ScramSHA256, Tests: kgoSCRAMTests,
			Env: []string{"KGO_TEST_SCRAM=" + s.User + ":" + s.Password + ":256"}})
	}
	if slices.Contains(caps, MTLS) {
		vs = append(vs, KgoVariant{Name: "KGO_TEST_TLS over SSL", Cap: MTLS,
			Tests: []string{"TestPing", "TestClient_Produce", "TestIssue325"},
			Env: []string{"KGO_SEEDS=" + s.Addrs["SSL"],
				"KGO_TEST_TLS=ca:" + s.CAFile + ",cert:" + s.Client.CertFile + ",key:" + s.Client.KeyFile}})
	}
	return vs
}

// securityScripts are the clients' produce-and-consume scripts that take
// --protocol, --mechanism and certificates (the e2e TLS test runs them
// too). kcat is driven by kcat.sh with KCAT_CONFIG instead.
var securityScripts = map[string]string{
	"kafka-python":           "tls_kafka_python.py",
	"confluent-kafka-python": "tls_confluent_kafka.py",
	"kafkajs":                "tls_kafkajs.js",
}

// tlsVerdict is what a security script prints.
type tlsVerdict struct {
	Produced int    `json:"produced"`
	Consumed int    `json:"consumed"`
	Error    string `json:"error"`
}

// runSecurity fills c's row with a cell for each cap of SecurityCaps:
// the client produces securityCount records and reads them back over
// that cap's listener, and the agent (through PLAINTEXT) must hold them.
func runSecurity(ctx context.Context, c scriptClient, scriptsDir string, env Env, sec *Security, caps []Capability, row *Row) {
	start := time.Now()
	defer func() { row.Elapsed += time.Since(start) }()
	caps = slices.DeleteFunc(slices.Clone(caps), func(cp Capability) bool { return !slices.Contains(SecurityCaps, cp) })
	if len(caps) == 0 {
		return
	}
	argv, extraEnv, err := c.command()
	if err != nil {
		row.missing(caps, err)
		return
	}
	v, verr := newVerifier(env.Addr)
	if verr == nil {
		defer v.close()
	}
	for _, cp := range caps {
		sc := securityCases[cp]
		topic := fmt.Sprintf("%s-%s-%s", env.Prefix, c.name, cp)
		var cell Cell
		if c.name == "kcat" {
			cell = kcatSecurity(ctx, c, scriptsDir, env, sec, sc, cp)
		} else {
			cell = scriptSecurity(ctx, argv, extraEnv, filepath.Join(scriptsDir, securityScripts[c.name]), env, sec, sc, topic)
		}
		if cell.Status == Pass && c.name != "kcat" { // kcat.sh's claim was checked by runScript
			if verr != nil {
				cell = Cell{Status: Fail, Detail: "cannot check the claim: " + verr.Error()}
			} else if err := v.check(ctx, claim{Topic: topic, Produced: securityCount}); err != nil {
				cell = Cell{Status: Fail, Detail: sc.String() + ": " + err.Error()}
			}
		}
		row.set(cp, cell)
	}
}

// scriptSecurity runs one security script for sc and judges its verdict.
func scriptSecurity(ctx context.Context, argv, extraEnv []string, script string, env Env, sec *Security, sc securityCase, topic string) Cell {
	if err := createTopic(ctx, env, topic); err != nil {
		return Cell{Status: Fail, Detail: fmt.Sprintf("creating %s through PLAINTEXT: %v", topic, err)}
	}
	args := append(slices.Clone(argv), script, "--bootstrap", sec.Addrs[sc.protocol], "--topic", topic,
		"--count", strconv.Itoa(securityCount), "--protocol", sc.protocol)
	if sc.mechanism != "" {
		args = append(args, "--mechanism", sc.mechanism, "--user", sec.User, "--password", sec.Password)
	}
	if strings.Contains(sc.protocol, "SSL") {
		args = append(args, "--ca", sec.CAFile, "--cert", sec.Client.CertFile, "--key", sec.Client.KeyFile)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*env.StepTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), extraEnv...)
	ownProcessGroup(cmd)
	var stdout bytes.Buffer
	stderr := newTailWriter(scriptStderrBytes)
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	runErr := cmd.Run()
	var vd tlsVerdict
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &vd); err != nil {
		return Cell{Status: Fail, Detail: fmt.Sprintf("%s: %s printed no verdict (%v, %v): %s", sc, filepath.Base(script), runErr, err, lastLines(stderr.String(), 3))}
	}
	if vd.Error != "" || vd.Produced != securityCount || vd.Consumed != securityCount {
		return Cell{Status: Fail, Detail: fmt.Sprintf("%s: produced %d, consumed %d of %d: %s", sc, vd.Produced, vd.Consumed, securityCount, vd.Error)}
	}
	return Cell{Status: Pass, Detail: fmt.Sprintf("%s: %d records produced and read back", sc, securityCount)}
}

// kcatSecurity runs kcat.sh's produce and consume checks with the
// librdkafka settings for sc in a KCAT_CONFIG file; runScript checks the
// produce claim against the PLAINTEXT listener.
func kcatSecurity(ctx context.Context, c scriptClient, scriptsDir string, env Env, sec *Security, sc securityCase, cp Capability) Cell {
	props := []string{"security.protocol=" + sc.protocol}
	if sc.mechanism != "" {
		props = append(props, "sasl.mechanisms="+sc.mechanism, "sasl.username="+sec.User, "sasl.password="+sec.Password)
	}
	if strings.Contains(sc.protocol, "SSL") {
		props = append(props, "ssl.ca.location="+sec.CAFile, "ssl.certificate.location="+sec.Client.CertFile,
			"ssl.key.location="+sec.Client.KeyFile)
	}
	conf := filepath.Join(scriptsDir, "kcat-"+string(cp)+".conf")
	if err := os.WriteFile(conf, []byte(strings.Join(props, "\n")+"\n"), 0o600); err != nil {
		return Cell{Status: Fail, Detail: err.Error()}
	}
	secured := c
	secured.command = func() ([]string, []string, error) {
		argv, extra, err := c.command()
		return argv, append(extra, "KCAT_CONFIG="+conf), err
	}
	senv := env
	senv.Bootstrap = sec.Addrs[sc.protocol]
	senv.Prefix = env.Prefix + "-" + string(cp)
	senv.Records = securityCount
	r := runScript(ctx, secured, scriptsDir, senv, []Capability{Produce, Consume})
	for _, step := range []Capability{Produce, Consume} {
		if cell := r.Cells[step]; cell.Status != Pass {
			return Cell{Status: cell.Status, Detail: fmt.Sprintf("%s: kcat.sh %s: %s", sc, step, cell.Detail)}
		}
	}
	return Cell{Status: Pass, Detail: fmt.Sprintf("%s: kcat.sh %s", sc, r.Cells[Produce].Detail)}
}

// createTopic makes a one-partition topic through the PLAINTEXT
// listener: the security scripts read partition 0.
func createTopic(ctx context.Context, env Env, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, env.StepTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, topic)
	return err
}

// kadmSASLPlain is the kadm row's sasl-plain cell: the admin client
// authenticates with PLAIN over SASL_PLAINTEXT and reads the SCRAM
// credentials the agent stored for that user (KIP-554), which must be
// both mechanisms with Kafka's minimum of 4096 iterations.
func kadmSASLPlain(ctx context.Context, env Env, sec *Security) Cell {
	ctx, cancel := context.WithTimeout(ctx, env.StepTimeout)
	defer cancel()
	sc := securityCases[SASLPlain]
	cl, err := kgo.NewClient(kgo.SeedBrokers(sec.Addrs[sc.protocol]),
		kgo.SASL(plain.Auth{User: sec.User, Pass: sec.Password}.AsMechanism()))
	if err != nil {
		return Cell{Status: Fail, Detail: err.Error()}
	}
	defer cl.Close()
	described, err := kadm.NewClient(cl).DescribeUserSCRAMs(ctx, sec.User)
	if err == nil {
		err = described[sec.User].Err
	}
	if err != nil {
		return Cell{Status: Fail, Detail: fmt.Sprintf("%s: DescribeUserScramCredentials: %v", sc, err)}
	}
	var got []string
	for _, info := range described[sec.User].CredInfos {
		if info.Iterations < 4096 {
			return Cell{Status: Fail, Detail: fmt.Sprintf("%s: %v with %d iterations, fewer than 4096", sc, info.Mechanism, info.Iterations)}
		}
		got = append(got, info.Mechanism.String())
	}
	slices.Sort(got)
	if want := []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}; !slices.Equal(got, want) {
		return Cell{Status: Fail, Detail: fmt.Sprintf("%s: %s has credentials %v, want %v", sc, sec.User, got, want)}
	}
	return Cell{Status: Pass, Detail: fmt.Sprintf("%s: DescribeUserScramCredentials lists %s's %s", sc, sec.User, strings.Join(got, " and "))}
}

// kadmSCRAMUser is the kadm row's cell for a SCRAM mechanism (KIP-554):
// kadm, as the bootstrap user over SASL_SSL with SCRAM-SHA-512, creates
// a user with mech's credentials; that user authenticates with mech
// over SASL_PLAINTEXT; once kadm deletes the credential, it is refused.
func kadmSCRAMUser(ctx context.Context, env Env, sec *Security, cp Capability, mech kadm.ScramMechanism) Cell {
	ctx, cancel := context.WithTimeout(ctx, env.StepTimeout)
	defer cancel()
	fail := func(format string, args ...any) Cell {
		return Cell{Status: Fail, Detail: fmt.Sprintf("%v: ", mech) + fmt.Sprintf(format, args...)}
	}
	tlsCfg, err := certs.ClientConfig(certs.ClientFiles{CAFile: sec.CAFile, CertFile: sec.Client.CertFile, KeyFile: sec.Client.KeyFile})
	if err != nil {
		return fail("%v", err)
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(sec.Addrs["SASL_SSL"]), kgo.DialTLSConfig(tlsCfg),
		kgo.SASL(scram.Auth{User: sec.User, Pass: sec.Password}.AsSha512Mechanism()))
	if err != nil {
		return fail("%v", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	user, password := fmt.Sprintf("%s-kadm-%s", env.Prefix, cp), "pw-"+randomSuffix()
	if err := alterSCRAM(ctx, adm, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: mech, Iterations: 4096, Password: password}}); err != nil {
		return fail("AlterUserScramCredentials creating %s over SASL_SSL: %v", user, err)
	}
	auth := scram.Auth{User: user, Pass: password}
	m := auth.AsSha256Mechanism()
	if mech == kadm.ScramSha512 {
		m = auth.AsSha512Mechanism()
	}
	// With no retries, the first Metadata reports an authentication
	// failure instead of retrying it until the context ends.
	metadata := func() error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(sec.Addrs["SASL_PLAINTEXT"]), kgo.SASL(m), kgo.RequestRetries(0))
		if err != nil {
			return err
		}
		defer cl.Close()
		_, err = kadm.NewClient(cl).BrokerMetadata(ctx)
		return err
	}
	if err := metadata(); err != nil {
		return fail("the new user %s over SASL_PLAINTEXT: %v", user, err)
	}
	if err := alterSCRAM(ctx, adm, []kadm.DeleteSCRAM{{User: user, Mechanism: mech}}, nil); err != nil {
		return fail("AlterUserScramCredentials deleting %s: %v", user, err)
	}
	if err := metadata(); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		return fail("%s after its credential was deleted: %v, want SASL_AUTHENTICATION_FAILED", user, err)
	}
	return Cell{Status: Pass, Detail: fmt.Sprintf("AlterUserScramCredentials over SASL_SSL created %s (%v, 4096 iterations), "+
		"who then authenticated over SASL_PLAINTEXT; after the deletion, SASL_AUTHENTICATION_FAILED", user, mech)}
}

func alterSCRAM(ctx context.Context, adm *kadm.Client, del []kadm.DeleteSCRAM, upsert []kadm.UpsertSCRAM) error {
	res, err := adm.AlterUserSCRAMs(ctx, del, upsert)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("%s: %w %s", r.User, r.Err, r.ErrMessage)
		}
	}
	return nil
}
