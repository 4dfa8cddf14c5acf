package agent

// SASL on the agent: the kafka package's SASLConfig from the flags, and
// the bootstrap user, created in the replicated database at startup if
// it has no credentials, so a new cluster whose only listeners need
// SASL can be reached at all. Its password comes from
// STRAND_SASL_BOOTSTRAP_PASSWORD or --sasl-bootstrap-password-file,
// never a flag (a command line is visible to every user of the
// machine), and is never logged.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/strandkafka/strand/internal/kafka"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
)

// bootstrapScramIterations is the bootstrap user's SCRAM iteration
// count: twice Kafka's floor.
const bootstrapScramIterations = 8192

// saslConfig is the kafka package's SASL settings from c.
func (c *Config) saslConfig() kafka.SASLConfig {
	s := kafka.SASLConfig{
		SessionLifetime: c.ConnectionsMaxReauth,
		FailedAuthDelay: c.ConnectionFailedAuthenticationDelay,
	}
	if c.SASLEnabledMechanisms != "" {
		for _, m := range strings.Split(c.SASLEnabledMechanisms, ",") {
			s.Mechanisms = append(s.Mechanisms, strings.TrimSpace(m))
		}
	}
	return s
}

// validateSASL reports the SASL settings' mistakes.
func (c *Config) validateSASL() []error {
	var errs []error
	if err := (kafka.Config{SASL: c.saslConfig()}).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("sasl-enabled-mechanisms or connections-max-reauth-ms: %w", err))
	}
	switch {
	case c.SASLBootstrapPassword != "" && c.SASLBootstrapPasswordFile != "":
		errs = append(errs, errors.New("sasl-bootstrap-password-file and STRAND_SASL_BOOTSTRAP_PASSWORD: give one"))
	case c.SASLBootstrapUser == "" && (c.SASLBootstrapPassword != "" || c.SASLBootstrapPasswordFile != ""):
		errs = append(errs, errors.New("a SASL bootstrap password needs --sasl-bootstrap-user"))
	case c.SASLBootstrapUser != "" && c.SASLBootstrapPassword == "" && c.SASLBootstrapPasswordFile == "":
		errs = append(errs, errors.New("sasl-bootstrap-user needs STRAND_SASL_BOOTSTRAP_PASSWORD or --sasl-bootstrap-password-file"))
	}
	return errs
}

// bootstrapPassword is STRAND_SASL_BOOTSTRAP_PASSWORD or the first line
// of --sasl-bootstrap-password-file.
func (c *Config) bootstrapPassword() (string, error) {
	if c.SASLBootstrapPasswordFile == "" {
		return c.SASLBootstrapPassword, nil
	}
	b, err := os.ReadFile(c.SASLBootstrapPasswordFile)
	if err != nil {
		return "", fmt.Errorf("sasl-bootstrap-password-file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimRight(line, "\r"); line == "" {
		return "", errors.New("sasl-bootstrap-password-file: empty password")
	}
	return line, nil
}

// ensureBootstrapUser gives the configured bootstrap user SCRAM-SHA-256
// and SCRAM-SHA-512 credentials (which PLAIN checks too) unless it has
// them already: a password changed since is left alone.
func ensureBootstrapUser(ctx context.Context, r *replica.Replica, cfg *Config, logger *slog.Logger) error {
	user := cfg.SASLBootstrapUser
	if user == "" {
		return nil
	}
	password, err := cfg.bootstrapPassword()
	if err != nil {
		return err
	}
	var cmds []meta.Command
	v := r.View()
	for _, m := range meta.ScramMechanisms {
		_, ok, err := v.ScramCredential(user, m)
		if err != nil {
			v.Close()
			return err
		}
		if ok {
			continue
		}
		c, err := kafka.NewScramCredential(user, password, m, bootstrapScramIterations)
		if err != nil {
			v.Close()
			return err
		}
		cmds = append(cmds, c)
	}
	v.Close()
	if len(cmds) == 0 {
		return nil
	}
	res, err := r.ProposeBatch(ctx, cmds)
	if errors.Is(err, meta.ErrNotAtLevel) {
		return fmt.Errorf("creating SASL bootstrap user %q: the cluster is below strand.metadata.version %d (raise it with strand features)", user, meta.MetadataLevel4)
	}
	if err != nil {
		return fmt.Errorf("creating SASL bootstrap user %q: %w", user, err)
	}
	for _, x := range res {
		if err := x.Err(); err != nil {
			return fmt.Errorf("creating SASL bootstrap user %q: %w", user, err)
		}
	}
	logger.Info("created the SASL bootstrap user", "user", user, "mechanisms", len(cmds))
	return nil
}
