package clientmetrics

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// A push's payload is OTLP's MetricsData (opentelemetry-proto
// metrics/v1/metrics.proto), read field by field with protowire: the
// generated OTLP package is not a dependency, and only these fields are
// needed (numbers from metrics.proto):
//
//	MetricsData      1: repeated ResourceMetrics
//	ResourceMetrics  2: repeated ScopeMetrics
//	ScopeMetrics     2: repeated Metric
//	Metric           1: name, 2: description, 5: Gauge, 7: Sum,
//	                 9: Histogram, 10: ExponentialHistogram, 11: Summary
//	Gauge            1: repeated NumberDataPoint
//	Sum              1: repeated NumberDataPoint, 2: temporality, 3: is_monotonic
//	NumberDataPoint  7: repeated KeyValue attributes, 4: as_double (fixed64),
//	                 6: as_int (sfixed64)
//	KeyValue         1: key, 2: AnyValue
//	AnyValue         1: string, 2: bool, 3: int64, 4: double (others skipped)
//
// Unknown fields are skipped, as protobuf readers must.

// Kind is how a point is exported.
type Kind uint8

const (
	// Gauge: an OTLP gauge or a non-monotonic sum.
	Gauge Kind = iota + 1
	// Counter: a monotonic cumulative sum.
	Counter
)

// Point is one decoded data point.
type Point struct {
	// Name is the OTLP metric name as sent (dots and all).
	Name string
	Help string
	Kind Kind
	// Attrs are the point's attributes in the order sent, at most
	// maxAttrsPerPoint; values are rendered as strings.
	Attrs [][2]string
	Value float64
}

// Decoded is what one payload held.
type Decoded struct {
	Points []Point
	// Skipped counts data points left out: histograms, summaries,
	// delta sums (the subscription asks for cumulative ones).
	Skipped int
}

// maxAttrsPerPoint bounds the labels one series gets from its
// attributes; clients send a handful (node.id, topic, partition).
const maxAttrsPerPoint = 8

// maxPointsPerPush bounds what one payload may make: the payload is
// already bounded by TelemetryMaxBytes, but tiny points are many.
const maxPointsPerPush = 20000

var errMalformed = errors.New("malformed OTLP metrics payload")

// DecodeMetrics reads an uncompressed OTLP MetricsData payload.
func DecodeMetrics(b []byte) (Decoded, error) {
	var d Decoded
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			if num != 2 || typ != protowire.BytesType {
				return nil
			}
			return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				if num != 2 || typ != protowire.BytesType {
					return nil
				}
				return d.metric(v)
			})
		})
	})
	return d, err
}

func (d *Decoded) metric(b []byte) error {
	var name, help string
	var data []byte
	var kind protowire.Number
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			name = string(v)
		case num == 2 && typ == protowire.BytesType:
			help = string(v)
		case (num == 5 || num == 7 || num == 9 || num == 10 || num == 11) && typ == protowire.BytesType:
			kind, data = num, v
		}
		return nil
	})
	if err != nil || name == "" {
		return err
	}
	var points [][]byte
	monotonic, cumulative := false, false
	err = eachField(data, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			points = append(points, v)
		case num == 2 && typ == protowire.VarintType:
			x, _ := protowire.ConsumeVarint(v)
			cumulative = x == 2 // AGGREGATION_TEMPORALITY_CUMULATIVE
		case num == 3 && typ == protowire.VarintType:
			x, _ := protowire.ConsumeVarint(v)
			monotonic = x != 0
		}
		return nil
	})
	if err != nil {
		return err
	}
	var k Kind
	switch {
	case kind == 5:
		k = Gauge
	case kind == 7 && monotonic && cumulative:
		k = Counter
	case kind == 7 && !monotonic:
		k = Gauge
	default:
		// Histograms and summaries have no single value to export, and
		// a delta sum is not a counter's value.
		d.Skipped += len(points)
		return nil
	}
	for _, p := range points {
		if len(d.Points) >= maxPointsPerPush {
			d.Skipped++
			continue
		}
		pt, ok, err := numberPoint(p)
		if err != nil {
			return err
		}
		if !ok {
			d.Skipped++
			continue
		}
		pt.Name, pt.Help, pt.Kind = name, help, k
		d.Points = append(d.Points, pt)
	}
	return nil
}

func numberPoint(b []byte) (Point, bool, error) {
	var p Point
	has := false
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == 4 && typ == protowire.Fixed64Type:
			x, _ := protowire.ConsumeFixed64(v)
			p.Value, has = math.Float64frombits(x), true
		case num == 6 && typ == protowire.Fixed64Type:
			x, _ := protowire.ConsumeFixed64(v)
			p.Value, has = float64(int64(x)), true
		case num == 7 && typ == protowire.BytesType:
			if len(p.Attrs) >= maxAttrsPerPoint {
				return nil
			}
			kv, err := keyValue(v)
			if err != nil {
				return err
			}
			if kv[0] != "" {
				p.Attrs = append(p.Attrs, kv)
			}
		}
		return nil
	})
	return p, has, err
}

func keyValue(b []byte) ([2]string, error) {
	var kv [2]string
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			kv[0] = string(v)
		case num == 2 && typ == protowire.BytesType:
			return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					kv[1] = string(v)
				case num == 2 && typ == protowire.VarintType:
					x, _ := protowire.ConsumeVarint(v)
					kv[1] = strconv.FormatBool(x != 0)
				case num == 3 && typ == protowire.VarintType:
					x, _ := protowire.ConsumeVarint(v)
					kv[1] = strconv.FormatInt(int64(x), 10)
				case num == 4 && typ == protowire.Fixed64Type:
					x, _ := protowire.ConsumeFixed64(v)
					kv[1] = strconv.FormatFloat(math.Float64frombits(x), 'g', -1, 64)
				}
				return nil
			})
		}
		return nil
	})
	return kv, err
}

// eachField calls fn with each field of message b; v is the field's
// value bytes (a varint's or fixed's encoding, or a bytes field's
// contents). Groups are skipped whole.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		if typ == protowire.BytesType {
			v, n = protowire.ConsumeBytes(b)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n >= 0 {
				v = b[:n]
			}
		}
		if n < 0 {
			return fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v); err != nil {
			return err
		}
	}
	return nil
}

// PromName turns an OTLP metric name (org.apache.kafka.producer.record.send.rate)
// into a Prometheus one (org_apache_kafka_producer_record_send_rate), as
// OpenTelemetry's Prometheus exporter does without units.
func PromName(s string) string { return sanitize(s, true) }

// promLabel turns an attribute key into a label name.
func promLabel(s string) string {
	l := sanitize(s, false)
	for strings.HasPrefix(l, "__") { // reserved to Prometheus
		l = l[1:]
	}
	return l
}

func sanitize(s string, colon bool) string {
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range s {
		ok := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || (i > 0 && r >= '0' && r <= '9') || (colon && r == ':')
		if !ok {
			if i == 0 && r >= '0' && r <= '9' {
				b.WriteByte('_')
				b.WriteRune(r)
				continue
			}
			r = '_'
		}
		b.WriteRune(r)
	}
	return b.String()
}
