// Package loglevel owns an agent's live log levels, what Kafka calls its
// broker loggers (KIP-412's BROKER_LOGGER resource): the root level and
// an override per component (the "component" attribute the agent gives
// each subsystem's logger). Levels are read on every record, so a
// change applies at once; like Kafka, nothing here is persisted.
package loglevel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Root is the root logger's name, as Kafka names it.
const Root = "root"

// componentKey is the attribute that names a logger's component.
const componentKey = "component"

// Levels beyond slog's four, for Kafka's log4j names: TRACE below DEBUG,
// FATAL above ERROR, OFF above everything logged.
const (
	Lowest     = slog.LevelDebug - 4 // TRACE (and ALL)
	levelFatal = slog.LevelError + 4
	levelOff   = slog.Level(1 << 20)
)

// Errors of Set and Reset; Kafka's codes for each are the caller's.
var (
	ErrUnknownLogger = errors.New("logger does not exist")
	ErrBadLevel      = errors.New("not a supported log level; valid levels are TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF and ALL")
	ErrRootReset     = errors.New("removing the log level of the root logger is not allowed")
)

// Levels is the live levels of one agent's loggers. Safe for concurrent
// use.
type Levels struct {
	root slog.LevelVar
	mu   struct {
		sync.Mutex
		components map[string]*component
	}
}

// component is one named logger: the root's level unless set.
type component struct {
	set   atomic.Bool
	level slog.LevelVar
}

// New returns levels with the root at INFO.
func New() *Levels {
	l := &Levels{}
	l.mu.components = map[string]*component{}
	return l
}

// ParseLevel reads a log4j level name (case-insensitive) or a slog one
// (debug, info, warn, error).
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "TRACE", "ALL":
		return Lowest, nil
	case "DEBUG":
		return slog.LevelDebug, nil
	case "INFO":
		return slog.LevelInfo, nil
	case "WARN", "WARNING":
		return slog.LevelWarn, nil
	case "ERROR":
		return slog.LevelError, nil
	case "FATAL":
		return levelFatal, nil
	case "OFF":
		return levelOff, nil
	}
	return 0, fmt.Errorf("%q: %w", s, ErrBadLevel)
}

// LevelName is level's log4j name.
func LevelName(level slog.Level) string {
	switch {
	case level <= Lowest:
		return "TRACE"
	case level <= slog.LevelDebug:
		return "DEBUG"
	case level <= slog.LevelInfo:
		return "INFO"
	case level <= slog.LevelWarn:
		return "WARN"
	case level <= slog.LevelError:
		return "ERROR"
	case level <= levelFatal:
		return "FATAL"
	}
	return "OFF"
}

// SetRootText sets the root level from its name.
func (l *Levels) SetRootText(s string) error {
	lv, err := ParseLevel(s)
	if err != nil {
		return err
	}
	l.root.Set(lv)
	return nil
}

// Logger is one logger and its effective level's name.
type Logger struct {
	Name, Level string
}

// Loggers lists root, then the components by name, each with the level
// it logs at.
func (l *Levels) Loggers() []Logger {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []Logger{{Root, LevelName(l.root.Level())}}
	for _, name := range slices.Sorted(maps.Keys(l.mu.components)) {
		out = append(out, Logger{name, LevelName(l.effective(l.mu.components[name]))})
	}
	return out
}

// Known reports whether name is a logger.
func (l *Levels) Known(name string) bool {
	if name == Root {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.mu.components[name]
	return ok
}

// Set sets logger name's level from its name.
func (l *Levels) Set(name, level string) error {
	lv, err := ParseLevel(level)
	if err != nil {
		return err
	}
	if name == Root {
		l.root.Set(lv)
		return nil
	}
	c, err := l.lookup(name)
	if err != nil {
		return err
	}
	c.level.Set(lv)
	c.set.Store(true)
	return nil
}

// Reset makes logger name follow the root's level again.
func (l *Levels) Reset(name string) error {
	if name == Root {
		return ErrRootReset
	}
	c, err := l.lookup(name)
	if err != nil {
		return err
	}
	c.set.Store(false)
	return nil
}

func (l *Levels) lookup(name string) (*component, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.mu.components[name]
	if !ok {
		return nil, fmt.Errorf("%q: %w", name, ErrUnknownLogger)
	}
	return c, nil
}

// component returns the logger of name, made on first use.
func (l *Levels) component(name string) *component {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.mu.components[name]
	if !ok {
		c = &component{}
		l.mu.components[name] = c
	}
	return c
}

// effective is the level c logs at (nil: the root).
func (l *Levels) effective(c *component) slog.Level {
	if c != nil && c.set.Load() {
		return c.level.Level()
	}
	return l.root.Level()
}

// Handler wraps h, which should pass every level (HandlerOptions.Level
// Lowest), so that a record is handled only at or above its logger's
// level: the root's, or that of the component a With("component", name)
// names.
func (l *Levels) Handler(h slog.Handler) slog.Handler {
	return &handler{inner: h, levels: l}
}

type handler struct {
	inner  slog.Handler
	levels *Levels
	comp   *component
}

func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.levels.effective(h.comp) && h.inner.Enabled(ctx, level)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error { return h.inner.Handle(ctx, r) }

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	comp := h.comp
	for _, a := range attrs {
		if a.Key == componentKey {
			comp = h.levels.component(a.Value.String())
		}
	}
	return &handler{inner: h.inner.WithAttrs(attrs), levels: h.levels, comp: comp}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{inner: h.inner.WithGroup(name), levels: h.levels, comp: h.comp}
}
