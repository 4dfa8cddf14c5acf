package agent

// The SQL endpoint: PostgreSQL's wire protocol (package sql/pgwire) on
// --sql-listen, off unless given. 6875 is the port to give it, the one
// Materialize and RisingWave's docs use for the same job, kept apart
// from PostgreSQL's 5432 so a real PostgreSQL beside the agent does not
// collide; it becomes the loopback default once views exist to serve.
//
// Who may connect follows the HTTP port's rule (admin_auth.go):
//
//   - when any listener speaks SASL or any SCRAM user exists, a client
//     authenticates with SCRAM-SHA-256 as one of the agent's SCRAM users
//     (the SCRAM-SHA-256 credentials Kafka's SASL uses, read from the
//     replicated metadata at each login, so a user made or changed with
//     `strand user` or AlterUserScramCredentials takes effect at once);
//   - otherwise (no authentication configured at all) a loopback
//     --sql-listen trusts the user name the client gives, as the
//     embedded default's Kafka and HTTP ports do, and any other address
//     refuses every connection with 28000.
//
// With --sql-tls the endpoint answers SSLRequest with TLS on the
// agent's certificate (--tls-cert-file, --tls-key-file, reloaded as
// they change).
//
// Statements go through the catalog (package sql/catalog: the DDL of
// sources, materialized views and sinks, proposed through this agent's
// replica, and SHOW), then the engine, whose SELECTs read the catalog's
// sources and the system catalog (catalog.Relations). A session's
// principal is User:<its SQL user>, authorized as on the Kafka port
// (authorizeSQL); a source's topic is read by an in-process Kafka
// client as sqlPrincipal, a super user, once the session's READ on the
// source has been checked (the source, not its topic, is what a SQL
// user is granted). CREATE/ALTER/DROP CONNECTOR and SHOW CONNECTORS go
// to the connectors' Manager (connect.go), authorized on CONNECTOR ACLs
// by authorizeSQL as the REST API's callers are.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/certs"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/catalog"
	"github.com/strandkafka/strand/internal/sql/engine"
	"github.com/strandkafka/strand/internal/sql/pgwire"
	"github.com/strandkafka/strand/internal/sql/source"
	"github.com/strandkafka/strand/internal/sql/views"
)

// validateSQL reports the SQL endpoint's setting mistakes.
func (c *Config) validateSQL() []error {
	var errs []error
	if c.SQLListen != "" {
		if _, _, err := net.SplitHostPort(c.SQLListen); err != nil {
			errs = append(errs, fmt.Errorf("sql-listen %q: %w", c.SQLListen, err))
		}
	}
	if c.SQLTLS {
		files, err := c.tlsFiles()
		if err == nil {
			err = files.Validate()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sql-tls: %w", err))
		}
	}
	return errs
}

// startSQL opens the SQL endpoint when --sql-listen is set.
func (a *Agent) startSQL() error {
	if a.cfg.SQLListen == "" {
		return nil
	}
	var tlsCfg *tls.Config
	if a.cfg.SQLTLS {
		files, err := a.cfg.tlsFiles()
		if err != nil {
			return fmt.Errorf("sql-tls: %w", err)
		}
		files.ClientAuth = certs.ClientAuthNone
		s, err := certs.NewServer(files, a.logger.With("component", "sql-tls"))
		if err != nil {
			return fmt.Errorf("sql-tls: %w", err)
		}
		tlsCfg = s.Config()
		a.metrics.certs.watch(endpointSQL, s)
	}
	ln, err := net.Listen("tcp", a.cfg.SQLListen)
	if err != nil {
		return fmt.Errorf("sql-listen: %w", err)
	}
	tcp, _ := ln.Addr().(*net.TCPAddr)
	a.sqlSourceMetrics = source.NewMetrics()
	a.metrics.reg.MustRegister(a.sqlSourceMetrics.Collectors()...)
	a.sqlViews, err = views.New(views.Config{Store: a.replica, Dir: filepath.Join(a.cfg.DataDir, "views"),
		Kafka: a.sqlKafka, Schemas: a.sqlSchemas, SourceMetrics: a.sqlSourceMetrics,
		Restore: a.restoreView, Logger: a.logger.With("component", "sql-views"), StepSlots: a.cfg.SQLViewStepSlots})
	if err == nil {
		err = a.newViewSnapshotter()
	}
	if err != nil {
		ln.Close()
		return err
	}
	a.metrics.reg.MustRegister(a.sqlViews.Metrics().Collectors()...)
	eng := engine.New(nil, "")
	cat, err := catalog.New(catalog.Config{Store: a.replica, Authorize: a.authorizeSQL, Denied: a.sqlDenied, Next: eng,
		Kafka: a.sqlKafka, Schemas: a.sqlSchemas, SourceMetrics: a.sqlSourceMetrics, Views: a.sqlViews, Sinks: a.sqlSinks,
		Connectors: a.connectManager()})
	if err != nil {
		return err
	}
	eng.SetCatalogFor(cat.Relations)
	a.sqlCatalog = cat
	srv, err := pgwire.NewServer(pgwire.Config{
		Engine: cat,
		Auth:   &sqlAuth{a: a, loopback: tcp != nil && tcp.IP.IsLoopback()},
		TLS:    tlsCfg,
		Logger: a.logger.With("component", "sql"),
	})
	if err != nil {
		ln.Close()
		return err
	}
	a.sqlLn, a.sqlSrv = ln, srv
	go func() {
		if err := srv.Serve(ln); err != nil {
			a.logger.Error("sql listener", "err", err)
		}
	}()
	a.logger.Info("sql endpoint listening", "addr", ln.Addr().String(), "tls", tlsCfg != nil)
	return nil
}

// authorizeSQL decides a SQL session's ACLs with the Kafka server's
// authorizer, so a SQL user may do what the same principal may over
// Kafka: everything with authorization off, what the ACLs allow with it
// on (package acl's doc maps statements to operations).
func (a *Agent) authorizeSQL(r acl.Request, op acl.Operation, typ acl.ResourceType, name string) (bool, error) {
	if r.Principal == tokenPrincipal || r.Principal == loopbackPrincipal {
		// The console's SQL page, for a caller HTTP takes as a super
		// user; no SQL login yields a principal of type Strand.
		return true, nil
	}
	if !a.ready.Load() {
		return false, errors.New("agent not ready: its authorizer is not up yet")
	}
	az := a.server.Authorizer()
	if az == nil {
		return true, nil
	}
	return az.Authorize(r, op, typ, name), nil
}

// sqlPrincipal is who the SQL endpoint's source scans read topics as;
// like consolePrincipal, of a type no client can claim.
var sqlPrincipal = auth.Principal{Type: "Strand", Name: "sql"}

// sqlKafka is catalog.Config.Kafka: a client of this agent, in process.
// Called per scan, after the Kafka listener is up (sessions start after
// the agent is ready).
func (a *Agent) sqlKafka() []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(a.kafkaLn.Addr().String()),
		kgo.Dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
			return a.inProcessDial(ctx, network, addr, sqlPrincipal)
		}),
	}
}

// sqlSchemas is catalog.Config.Schemas: the registry's schemas, one
// bounded cache for the endpoint's scans.
func (a *Agent) sqlSchemas() *source.Schemas {
	a.sqlSchemaOnce.Do(func() {
		a.sqlSchemaCache = source.NewSchemas(a.replica, a.registry, 0, 0)
	})
	return a.sqlSchemaCache
}

// startViews starts maintaining the materialized views, once the agent
// is ready: their readers are Kafka clients of this agent. Views are
// maintained only where SQL is served, since only there are they read.
func (a *Agent) startViews() {
	if a.sqlViews == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.viewsStop, a.viewsDone = cancel, make(chan struct{})
	go func() {
		defer close(a.viewsDone)
		stopSnaps := a.runViewSnapshots(ctx)
		a.sqlViews.Run(ctx)
		stopSnaps()
	}()
}

// stopSQL closes the SQL endpoint and its sessions, then stops
// maintaining views (before the Kafka server their readers read from,
// and the replica they watch). Sessions first: a view's task closes its
// state only once the reads of it in progress are done.
func (a *Agent) stopSQL() {
	if a.sqlSrv != nil {
		a.sqlSrv.Close()
	}
	if a.viewsStop != nil {
		a.viewsStop()
		<-a.viewsDone
	}
}

// SQLAddr is the address the SQL endpoint listens on, "" when off.
func (a *Agent) SQLAddr() string {
	if a.sqlLn == nil {
		return ""
	}
	return a.sqlLn.Addr().String()
}

// sqlAuth is pgwire.Auth over the agent's SCRAM users.
type sqlAuth struct {
	a        *Agent
	loopback bool
}

func (s *sqlAuth) Method() (pgwire.AuthMethod, string) {
	for _, l := range s.a.listeners {
		if l.protocol.SASL() {
			return pgwire.AuthSCRAM, ""
		}
	}
	v := s.a.replica.View()
	creds, err := v.ScramCredentials("")
	v.Close()
	if err != nil || len(creds) > 0 {
		// A copy that cannot be read is no reason to trust anyone.
		return pgwire.AuthSCRAM, ""
	}
	if s.loopback {
		return pgwire.AuthTrust, ""
	}
	return pgwire.AuthRefuse, "no SCRAM users exist and SASL is off, so this non-loopback SQL endpoint takes no connection: create a user with `strand user`"
}

func (s *sqlAuth) Credential(user string) (pgwire.Credential, bool, error) {
	v := s.a.replica.View()
	defer v.Close()
	c, ok, err := v.ScramCredential(user, meta.ScramSHA256)
	if err != nil || !ok {
		return pgwire.Credential{}, false, err
	}
	return pgwire.Credential{Salt: c.Salt, Iterations: int(c.Iterations), StoredKey: c.StoredKey, ServerKey: c.ServerKey}, true, nil
}

// sqlDenied is catalog.Config.Denied: a SQL statement's refusal, for
// the authorization log.
func (a *Agent) sqlDenied(r acl.Request, op acl.Operation, typ acl.ResourceType, name string) {
	a.denied(r, op, typ, name, endpointSQL, "")
}
