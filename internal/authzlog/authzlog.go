// Package authzlog owns the authorization log: every request the
// authorizer refuses, on the Kafka port or on an HTTP or SQL endpoint
// that asks the same authorizer, is counted and written at INFO by a
// logger named as Kafka's, kafka.authorizer.logger, so an operator finds
// a wrong principal or a missing ACL by reading the log rather than by
// trial. The logger is one of the agent's dynamic loggers (package
// loglevel): `strand cluster log-level set kafka.authorizer.logger WARN`
// silences it; DEBUG adds a line per allowed check on the Kafka port,
// as Kafka's authorizer writes them at DEBUG, neither counted nor
// rate-limited: an operator who lowers the level asks for that volume,
// for as long as the level stays.
//
// Lines are rate-limited with bounded memory: within a window of
// Window, each distinct denial (principal, host, operation, resource,
// listener) is written once and at most MaxLinesPerWindow lines are
// written; the rest are counted, and the next line written after the
// window closes says how many were suppressed. Counting (the Prometheus
// counter the agent feeds from OnDeny) is never suppressed.
package authzlog

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/clock"
)

// LoggerName is the logger's name, Kafka's.
const LoggerName = "kafka.authorizer.logger"

// Limits of the rate limiter.
const (
	// Window is how long a distinct denial is remembered: a client
	// retrying a refused request writes one line per Window.
	Window = 10 * time.Second
	// MaxLinesPerWindow bounds the lines, and the keys remembered, per
	// Window: a flood of distinct denials (a scan of topic names)
	// cannot fill the log or memory.
	MaxLinesPerWindow = 100
)

// Decision is one authorization check: a refused request (Denied), or,
// at DEBUG, an allowed one (Allowed).
type Decision struct {
	acl.Request
	Operation    acl.Operation
	ResourceType acl.ResourceType
	Name         string
	// Listener is the Kafka listener's name, or the endpoint for the
	// HTTP ones (admin, registry, connect, console, sql).
	Listener string
	// Request is what was asked, when known: the Kafka API's name or
	// the HTTP method and path.
	API string
}

// key identifies a denial for deduplication.
type key struct {
	principal, host, name, listener string
	op                              acl.Operation
	typ                             acl.ResourceType
}

// Log writes and counts denials. Safe for concurrent use.
type Log struct {
	logger *slog.Logger
	clock  clock.Clock
	onDeny func(Decision)

	mu struct {
		sync.Mutex
		windowStart time.Time
		seen        map[key]struct{}
		lines       int
		// suppressed counts denials not written since the last line.
		suppressed uint64
	}
}

// New returns a log writing with logger (whose "component" should be
// LoggerName, so the level is the dynamic logger's; see Logger) and
// calling onDeny, when not nil, for every denial.
func New(logger *slog.Logger, clk clock.Clock, onDeny func(Decision)) *Log {
	l := &Log{logger: logger, clock: clock.OrReal(clk), onDeny: onDeny}
	l.mu.seen = make(map[key]struct{})
	return l
}

// Logger is base as the authorization logger: the component attribute
// names the dynamic logger, which it makes known to the levels.
func Logger(base *slog.Logger) *slog.Logger { return base.With("component", LoggerName) }

// Denied records d. why, when not nil, is asked for the rule that
// decided only when a line is written. A nil Log does nothing, so
// callers without one need no check.
func (l *Log) Denied(d Decision, why func() string) {
	if l == nil {
		return
	}
	if l.onDeny != nil {
		l.onDeny(d)
	}
	if !l.logger.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	suppressed, ok := l.admit(d)
	if !ok {
		return
	}
	rule := ""
	if why != nil {
		rule = why()
	}
	attrs := []any{
		"principal", d.Principal.String(), "host", hostOrUnknown(d.Host), "operation", d.Operation.String(),
		"resource_type", acl.ResourceTypeName(d.ResourceType), "resource", d.Name, "pattern", "LITERAL",
		"listener", d.Listener,
	}
	if d.API != "" {
		attrs = append(attrs, "request", d.API)
	}
	if rule != "" {
		attrs = append(attrs, "rule", rule)
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	l.logger.Info("authorization denied", attrs...)
}

// Allowed writes d, an allowed check, at DEBUG when the logger is at
// DEBUG or below; else it costs one level check. A nil Log does nothing.
func (l *Log) Allowed(d Decision) {
	if l == nil || !l.logger.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	attrs := []any{
		"principal", d.Principal.String(), "host", hostOrUnknown(d.Host), "operation", d.Operation.String(),
		"resource_type", acl.ResourceTypeName(d.ResourceType), "resource", d.Name, "pattern", "LITERAL",
		"listener", d.Listener,
	}
	if d.API != "" {
		attrs = append(attrs, "request", d.API)
	}
	l.logger.Debug("authorization allowed", attrs...)
}

// admit decides whether d gets a line, and how many denials went
// unwritten before it.
func (l *Log) admit(d Decision) (suppressed uint64, ok bool) {
	now := l.clock.Now()
	k := key{principal: d.Principal.String(), host: d.Host, name: d.Name, listener: d.Listener, op: d.Operation, typ: d.ResourceType}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.mu.windowStart) >= Window || now.Before(l.mu.windowStart) {
		l.mu.windowStart, l.mu.lines = now, 0
		clear(l.mu.seen)
	}
	if _, dup := l.mu.seen[k]; dup || l.mu.lines >= MaxLinesPerWindow {
		l.mu.suppressed++
		return 0, false
	}
	l.mu.seen[k] = struct{}{}
	l.mu.lines++
	suppressed, l.mu.suppressed = l.mu.suppressed, 0
	return suppressed, true
}

func hostOrUnknown(h string) string {
	if h == "" {
		return "unknown"
	}
	return h
}
