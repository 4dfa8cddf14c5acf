package kafka

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func nopHandler(_ context.Context, r *Request) (kmsg.Response, error) {
	return r.Body.ResponseKind(), nil
}

func TestRegister(t *testing.T) {
	tests := []struct {
		name     string
		key      int16
		min, max int16
		h        Handler
		ok       bool
	}{
		{name: "ok", key: 3, min: 0, max: 12, h: nopHandler, ok: true},
		{name: "single version", key: 12, min: 4, max: 4, h: nopHandler, ok: true},
		{name: "kmsg max", key: 0, min: 0, max: kmsg.NewPtrProduceRequest().MaxVersion(), h: nopHandler, ok: true},
		{name: "above kmsg max", key: 0, min: 0, max: kmsg.NewPtrProduceRequest().MaxVersion() + 1, h: nopHandler},
		{name: "unknown key", key: 999, min: 0, max: 0, h: nopHandler},
		{name: "negative key", key: -1, min: 0, max: 0, h: nopHandler},
		{name: "nil handler", key: 3, min: 0, max: 1},
		{name: "min above max", key: 3, min: 2, max: 1, h: nopHandler},
		{name: "negative min", key: 3, min: -1, max: 1, h: nopHandler},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry()
			err := r.Register(tt.key, tt.min, tt.max, tt.h)
			if (err == nil) != tt.ok {
				t.Fatalf("Register: %v, want ok %v", err, tt.ok)
			}
			if !tt.ok {
				if !errors.Is(err, ErrBadRegistration) {
					t.Fatalf("error %v is not ErrBadRegistration", err)
				}
				if len(r.APIVersions()) != 0 {
					t.Fatal("a refused registration was kept")
				}
				return
			}
			assertKeys(t, r.APIVersions(), []kmsg.ApiVersionsResponseApiKey{{ApiKey: tt.key, MinVersion: tt.min, MaxVersion: tt.max}})
		})
	}
}

func TestRegistryTableSortedAndCopied(t *testing.T) {
	r := NewRegistry()
	for _, key := range []int16{60, 3, 18, 0, 32} {
		if err := r.Register(key, 0, 1, nopHandler); err != nil {
			t.Fatal(err)
		}
	}
	r.Unregister(32)
	r.Unregister(999) // no-op
	want := []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 0, MaxVersion: 1}, {ApiKey: 3, MaxVersion: 1}, {ApiKey: 18, MaxVersion: 1}, {ApiKey: 60, MaxVersion: 1},
	}
	assertKeys(t, r.APIVersions(), want)

	// DefaultRegistry hands out copies: extending one changes neither the
	// built-in table nor a server made earlier.
	builtinKeys := DefaultRegistry().APIVersions()
	d := DefaultRegistry()
	s, err := New(Config{Registry: d, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	// Key 3 at a range no built-in handler uses, and a key kmsg knows
	// that nothing serves.
	for _, key := range []int16{3, unservedKey(t)} {
		if err := d.Register(key, 0, 1, nopHandler); err != nil {
			t.Fatal(err)
		}
	}
	if e := d.lookup(3); e.maxVersion != 1 {
		t.Fatalf("extended copy serves key 3 up to v%d, want v1", e.maxVersion)
	}
	assertKeys(t, DefaultRegistry().APIVersions(), builtinKeys)
	assertKeys(t, s.APIVersions(), builtinKeys)
}

// unservedKey is a key kmsg knows that no built-in handler serves.
func unservedKey(t *testing.T) int16 {
	t.Helper()
	for key := int16(kmsg.MaxKey); key >= 0; key-- {
		if req := kmsg.RequestForKey(key); req != nil && req.MaxVersion() >= 1 && !builtin.lookup(key).ok {
			return key
		}
	}
	t.Fatal("every key is served")
	return 0
}
