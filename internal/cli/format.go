package cli

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FormatJSON selects one JSON object per record instead of a template.
const FormatJSON = "json"

// DefaultFormat prints each value on its own line.
const DefaultFormat = `%v\n`

// formatHelp documents the template verbs for --help.
const formatHelp = `output: "json", or a template with %t topic, %p partition, %o offset, %k key, ` +
	`%v value, %T timestamp (Unix ms), %h headers (k=v,k=v), %n or \n newline, \t tab, %% percent`

// recordFormatter renders one record onto dst and returns the extended
// slice, so the consumer reuses one buffer for a whole fetch.
type recordFormatter interface {
	appendRecord(dst []byte, r *kgo.Record) ([]byte, error)
}

// parseFormat compiles --format once, so a bad template fails before any
// record is fetched.
func parseFormat(s string) (recordFormatter, error) {
	if s == FormatJSON {
		return jsonFormat{}, nil
	}
	return parseTemplate(s)
}

// templatePiece is either literal text (verb 0) or one % verb.
type templatePiece struct {
	lit  []byte
	verb byte
}

type templateFormat []templatePiece

const templateVerbs = "tpokvTh"

func parseTemplate(s string) (templateFormat, error) {
	var (
		out templateFormat
		lit []byte
	)
	flushLit := func() {
		if len(lit) > 0 {
			out = append(out, templatePiece{lit: lit})
			lit = nil
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+1 == len(s) {
				return nil, fmt.Errorf("%w: --format %q: trailing %%", ErrUsage, s)
			}
			i++
			switch v := s[i]; {
			case v == '%':
				lit = append(lit, '%')
			case v == 'n':
				lit = append(lit, '\n')
			case containsByte(templateVerbs, v):
				flushLit()
				out = append(out, templatePiece{verb: v})
			default:
				return nil, fmt.Errorf("%w: --format %q: unknown verb %%%c", ErrUsage, s, v)
			}
		case c == '\\' && i+1 < len(s):
			// Shells pass "\n" as two characters; kcat and rpk read them
			// as escapes, and so do we. Other escapes stay as typed.
			switch s[i+1] {
			case 'n':
				lit, i = append(lit, '\n'), i+1
			case 't':
				lit, i = append(lit, '\t'), i+1
			case 'r':
				lit, i = append(lit, '\r'), i+1
			case '\\':
				lit, i = append(lit, '\\'), i+1
			default:
				lit = append(lit, c)
			}
		default:
			lit = append(lit, c)
		}
	}
	flushLit()
	return out, nil
}

func containsByte(s string, b byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return true
		}
	}
	return false
}

func (f templateFormat) appendRecord(dst []byte, r *kgo.Record) ([]byte, error) {
	for _, p := range f {
		switch p.verb {
		case 0:
			dst = append(dst, p.lit...)
		case 't':
			dst = append(dst, r.Topic...)
		case 'p':
			dst = strconv.AppendInt(dst, int64(r.Partition), 10)
		case 'o':
			dst = strconv.AppendInt(dst, r.Offset, 10)
		case 'k':
			dst = append(dst, r.Key...)
		case 'v':
			dst = append(dst, r.Value...)
		case 'T':
			dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, h.Key...)
				dst = append(dst, '=')
				dst = append(dst, h.Value...)
			}
		}
	}
	return dst, nil
}

// JSONRecord is the shape of one line of `consume --format json`. Key and
// Value are null for a null key or value (a tombstone), so they stay
// distinct from empty ones. Bytes that are not UTF-8 become U+FFFD.
type JSONRecord struct {
	Topic     string       `json:"topic"`
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Timestamp int64        `json:"timestamp"` // Unix milliseconds
	Key       *string      `json:"key"`
	Value     *string      `json:"value"`
	Headers   []JSONHeader `json:"headers"`
}

// JSONHeader is one record header; a list, not an object, because Kafka
// allows repeated header keys.
type JSONHeader struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type jsonFormat struct{}

func (jsonFormat) appendRecord(dst []byte, r *kgo.Record) ([]byte, error) {
	jr := JSONRecord{
		Topic:     r.Topic,
		Partition: r.Partition,
		Offset:    r.Offset,
		Timestamp: r.Timestamp.UnixMilli(),
		Key:       bytesPtr(r.Key),
		Value:     bytesPtr(r.Value),
		Headers:   make([]JSONHeader, 0, len(r.Headers)),
	}
	for _, h := range r.Headers {
		jr.Headers = append(jr.Headers, JSONHeader{Key: h.Key, Value: string(h.Value)})
	}
	b, err := json.Marshal(jr)
	if err != nil {
		return dst, err
	}
	dst = append(dst, b...)
	return append(dst, '\n'), nil
}

func bytesPtr(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}
