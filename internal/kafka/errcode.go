package kafka

import (
	"errors"
	"reflect"
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
		if f := v.FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 && f.Int() != 0 {
			return int16(f.Int())
		}
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if k := f.Kind(); k == reflect.Slice || k == reflect.Struct || k == reflect.Pointer {
				if code := errorCodeOf(f, depth+1); code != 0 {
					return code
				}
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return 0 // record bytes
		}
		for i := 0; i < v.Len(); i++ {
			if code := errorCodeOf(v.Index(i), depth+1); code != 0 {
				return code
			}
		}
	}
	return 0
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
	} {
		if errors.Is(err, r.err) {
			return r.label
		}
	}
	return "io"
}
