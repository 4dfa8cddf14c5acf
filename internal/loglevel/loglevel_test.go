package loglevel

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestLevels: a component logs at the root's level until set, follows
// it again after Reset, keeps its component through With and WithGroup,
// and the refusals are the named errors.
func TestLevels(t *testing.T) {
	var out bytes.Buffer
	l := New()
	root := slog.New(l.Handler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: Lowest})))
	kafka := root.With("component", "kafka").WithGroup("req").With("api", 3)
	root.With("component", "group")

	kafka.Debug("k1")
	if err := l.Set("kafka", "debug"); err != nil {
		t.Fatal(err)
	}
	kafka.Debug("k2")
	root.Debug("r1")
	if err := l.Set(Root, "ERROR"); err != nil {
		t.Fatal(err)
	}
	kafka.Debug("k3")
	if err := l.Reset("kafka"); err != nil {
		t.Fatal(err)
	}
	kafka.Warn("k4")
	kafka.Error("k5")
	got := out.String()
	for _, want := range []string{"msg=k2", "msg=k3", "msg=k5", "component=kafka"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %s:\n%s", want, got)
		}
	}
	for _, not := range []string{"msg=k1", "msg=r1", "msg=k4"} {
		if strings.Contains(got, not) {
			t.Errorf("log has %s:\n%s", not, got)
		}
	}
	want := []Logger{{Root, "ERROR"}, {"group", "ERROR"}, {"kafka", "ERROR"}}
	if got := l.Loggers(); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("Loggers %v, want %v", got, want)
	}

	if err := l.Set("nope", "INFO"); !errors.Is(err, ErrUnknownLogger) {
		t.Errorf("unknown logger: %v", err)
	}
	if err := l.Set("kafka", "LOUD"); !errors.Is(err, ErrBadLevel) {
		t.Errorf("bad level: %v", err)
	}
	if err := l.Reset(Root); !errors.Is(err, ErrRootReset) {
		t.Errorf("reset root: %v", err)
	}
}

func TestLevelNames(t *testing.T) {
	for _, name := range []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"} {
		lv, err := ParseLevel(strings.ToLower(name))
		if err != nil || LevelName(lv) != name {
			t.Errorf("%s: %v %v -> %s", name, lv, err, LevelName(lv))
		}
	}
	if lv, _ := ParseLevel("ALL"); LevelName(lv) != "TRACE" {
		t.Errorf("ALL is %s", LevelName(lv))
	}
}
