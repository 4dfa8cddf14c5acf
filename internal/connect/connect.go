// Package connect owns change data capture and the connectors that do
// it: Kafka Connect's REST API served by every agent, connector
// definitions in the replicated metadata, and the tasks that run them,
// each on the one agent placement gives it.
//
// The connector classes live in their own packages, named by what they
// connect to:
//
//   - pgsource: PostgreSQL's logical replication (pgoutput) into topics,
//     Debezium's envelope, one Strand transaction per batch of whole
//     PostgreSQL transactions (io.debezium.connector.postgresql.PostgresConnector);
//   - jdbcsink: topics into PostgreSQL and MariaDB/MySQL, the consumed
//     offsets committed in the target's transaction with the rows
//     (io.debezium.connector.jdbc.JdbcSinkConnector).
//
// Connectors are managed through a Manager (manage.go), which both the
// REST API (rest.go) and the SQL endpoint's CREATE/ALTER/DROP CONNECTOR
// (package sql/catalog) call, so that both check, seal and authorize
// alike.
//
// This file is the contract between the runner (which places, starts,
// stops and reports) and a class (which moves the data).
package connect

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/clock"
)

// Kind is a connector's direction, as Connect's REST API names it.
type Kind string

const (
	KindSource Kind = "source"
	KindSink   Kind = "sink"
)

// Class is one connector class: the Java class name configs name it by
// (connector.class), and how to check and start its configuration.
type Class struct {
	// Name is the connector.class value, e.g.
	// "io.debezium.connector.postgresql.PostgresConnector". Aliases
	// (the simple name, as Connect accepts "PostgresConnector") are
	// the runner's business.
	Name string
	Kind Kind
	// Validate checks a configuration (every value resolved, secrets
	// included) without connecting anywhere: unknown required keys,
	// bad values. Its error is the REST API's 400 message.
	Validate func(config map[string]string) error
	// Secret reports whether a configuration key holds a secret (a
	// password): its value stays out of the shared log and the REST
	// API shows it masked.
	Secret func(key string) bool
	// New makes the task of a validated configuration.
	New func(config map[string]string) (Task, error)
	// Forget, if set, drops a connector's metric series on this agent:
	// its task stopped here for good (the connector deleted, paused or
	// placed on another agent), so its series would otherwise stand
	// still until the agent restarts.
	Forget func(connector string)
}

// Task runs one connector on the agent placement gives it.
type Task interface {
	// Run moves data until ctx ends (the connector paused, moved to
	// another agent, reconfigured, restarted or deleted: return
	// ctx.Err() or nil) or it fails (return the error: the runner
	// reports the task FAILED with the error as its trace and starts
	// it again after a backoff). Run must be safe to start again after
	// any return or a kill -9 at any point: what it wrote and where it
	// resumes are its own to keep consistent.
	Run(ctx context.Context, env Env) error
}

// Env is what the runner gives a running task.
type Env struct {
	// Name is the connector's name.
	Name string
	// Kafka gives the options of an in-process client of this agent's
	// cluster, as a principal that may create, read and write every
	// topic and use every transactional id the task needs.
	Kafka func() []kgo.Opt
	// Dir is a directory of this task's own on this agent, kept across
	// restarts of the task there (not across agents).
	Dir    string
	Clock  clock.Clock
	Logger *slog.Logger
	// Running is called once the task is connected and moving data,
	// so that its status reads RUNNING rather than starting.
	Running func()
	// Authorize says whether the connector's owner (the principal that
	// created or last configured it) may do op on a topic: the task's
	// own client is a super user (it needs the offsets topic and its
	// transactional id), so a class asks before it creates (CREATE),
	// writes (WRITE) or reads (READ) a topic of the user's, and refuses
	// what the owner could not do over Kafka. Nil allows everything.
	Authorize func(op acl.Operation, topic string) error
}

// Allowed is env.Authorize(op, topic), nil when Authorize is.
func (env Env) Allowed(op acl.Operation, topic string) error {
	if env.Authorize == nil {
		return nil
	}
	return env.Authorize(op, topic)
}
