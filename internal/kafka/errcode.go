package kafka

import (
	"errors"
	"reflect"
	"sync"
)

// firstErrorCode returns the first non-zero ErrorCode field found in resp,
// walking top-level fields before nested topics and partitions, or 0. It
// exists for metrics ("requests by API and error code"): kmsg responses
// have no common error accessor, and keeping one list per API by hand
// would drift from the handlers.
func firstErrorCode(resp any) int16 {
	if resp == nil {
		return 0
	}
	if h, ok := resp.(heldResponse); ok {
		resp = h.Response
	}
	return errorCodeOf(reflect.ValueOf(resp), 0)
}

// maxErrorCodeDepth bounds the walk; kmsg responses nest at most a few
// levels (response, topic, partition, ...).
const maxErrorCodeDepth = 6

func errorCodeOf(v reflect.Value, depth int) int16 {
	if depth > maxErrorCodeDepth {
		return 0
	}
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return 0
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		return structErrorCode(v, planOf(v.Type()), depth)
	case reflect.Slice:
		elem := v.Type().Elem()
		if !mayHoldCode(elem, depth) {
			// Record bytes, replica lists.
			return 0
		}
		if elem.Kind() == reflect.Struct {
			// One plan for every element: a Metadata answer of
			// 65,536 partitions is walked at a few ns each.
			p := planOf(elem)
			for i := 0; i < v.Len(); i++ {
				if code := structErrorCode(v.Index(i), p, depth+1); code != 0 {
					return code
				}
			}
			return 0
		}
		for i := 0; i < v.Len(); i++ {
			if code := errorCodeOf(v.Index(i), depth+1); code != 0 {
				return code
			}
		}
	}
	return 0
}

func structErrorCode(v reflect.Value, p *codePlan, depth int) int16 {
	if p.errField >= 0 {
		if code := v.Field(p.errField).Int(); code != 0 {
			return int16(code)
		}
	}
	for _, i := range p.nested {
		if code := errorCodeOf(v.Field(i), depth+1); code != 0 {
			return code
		}
	}
	return 0
}

// codePlan is where error codes can be in values of one struct type.
type codePlan struct {
	// errField is the index of an int16 field named ErrorCode, or -1.
	errField int
	// nested are the fields that can hold error codes further down.
	nested []int
}

// codePlans caches planOf, by reflect.Type.
var codePlans sync.Map

func planOf(t reflect.Type) *codePlan {
	if p, ok := codePlans.Load(t); ok {
		return p.(*codePlan)
	}
	p := &codePlan{errField: -1}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		switch {
		case f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16:
			p.errField = i
		case mayHoldCode(f.Type, 0):
			p.nested = append(p.nested, i)
		}
	}
	codePlans.Store(t, p)
	return p
}

// mayHoldCode reports whether a value of type t can hold an ErrorCode
// field within the walk's depth.
func mayHoldCode(t reflect.Type, depth int) bool {
	if depth > maxErrorCodeDepth {
		return false
	}
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return mayHoldCode(t.Elem(), depth+1)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if (f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16) || mayHoldCode(f.Type, depth+1) {
				return true
			}
		}
	}
	return false
}

// CloseReason is a short, bounded label for why a connection closed, for
// metrics: the name of one of the package's sentinel errors, or "io" for
// anything else (network errors, handler errors).
func CloseReason(err error) string {
	for _, r := range []struct {
		err   error
		label string
	}{
		{ErrServerClosed, "server_closed"},
		{ErrFrameSize, "frame_size"},
		{ErrMalformedRequest, "malformed_request"},
		{ErrUnknownAPIKey, "unknown_api_key"},
		{ErrUnsupportedVersion, "unsupported_version"},
		{ErrIdleTimeout, "idle_timeout"},
		{ErrTooManyConnsPerIP, "too_many_conns_per_ip"},
		{ErrTooManyConns, "too_many_conns"},
		{ErrFrameTimeout, "frame_timeout"},
		{ErrHandlerPanic, "handler_panic"},
		{ErrMissingDeps, "missing_deps"},
		{ErrTLSHandshake, "tls_handshake"},
	} {
		if errors.Is(err, r.err) {
			return r.label
		}
	}
	return "io"
}
