// GetTelemetrySubscriptions: v0 (KIP-714 client telemetry)
//   - The subscription is Deps.Telemetry's (package clientmetrics): the
//     metric name prefixes the agent asks for (--client-telemetry-metrics),
//     its push interval and TelemetryMaxBytes, compression zstd, lz4, gzip
//     and snappy, cumulative temporality (DeltaTemporality false: the
//     metrics are re-exported as Prometheus counters).
//   - A zero ClientInstanceID is given a random (v4) one, as Kafka does.
//   - Asking again within the push interval without having pushed in
//     between is THROTTLING_QUOTA_EXCEEDED, as Kafka answers.
//   - Without Deps.Telemetry no metrics are requested (an empty
//     RequestedMetrics), as a Kafka broker without client-metrics
//     subscriptions answers: clients then push nothing.
//   - ACLs: none, as Kafka: any client that authenticated may ask.

package kafka

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/clientmetrics"
)

func init() { regKey(71, 0, 0, handleGetTelemetrySubscriptions) }

// noTelemetry answers for an agent without Deps.Telemetry: it requests
// no metrics, so clients never push.
var noTelemetry = clientmetrics.New(clientmetrics.Config{PushInterval: 5 * time.Minute})

func (d *Deps) telemetry() *clientmetrics.Manager {
	if d.Telemetry == nil {
		return noTelemetry
	}
	return d.Telemetry
}

// newClientInstanceID is a random UUID (version 4, RFC 9562), as Kafka's
// Uuid.randomUuid, never the zero id nor one of Kafka's reserved
// (the all-zero and the metadata topic's id of 0...01).
func newClientInstanceID() [16]byte {
	var id [16]byte
	rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

func handleGetTelemetrySubscriptions(_ context.Context, r *Request) (kmsg.Response, error) {
	req := r.Body.(*kmsg.GetTelemetrySubscriptionsRequest)
	resp := req.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
	sub, err := r.Deps.telemetry().Subscribe(req.ClientInstanceID, newClientInstanceID)
	if err != nil {
		resp.ErrorCode = telemetryErrorCode(err)
		return resp, nil
	}
	resp.ClientInstanceID = sub.InstanceID
	resp.SubscriptionID = sub.ID
	resp.AcceptedCompressionTypes = sub.AcceptedCompressionTypes
	resp.PushIntervalMillis = int32(sub.PushInterval / time.Millisecond)
	resp.TelemetryMaxBytes = sub.MaxBytes
	resp.DeltaTemporality = sub.DeltaTemporality
	resp.RequestedMetrics = sub.RequestedMetrics
	return resp, nil
}

// telemetryErrorCode maps package clientmetrics' errors to Kafka's
// codes, as Kafka's ClientMetricsManager raises them.
func telemetryErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, clientmetrics.ErrThrottled):
		return kerr.ThrottlingQuotaExceeded.Code
	case errors.Is(err, clientmetrics.ErrUnknownSubscription):
		return kerr.UnknownSubscriptionID.Code
	case errors.Is(err, clientmetrics.ErrTooLarge):
		return kerr.TelemetryTooLarge.Code
	case errors.Is(err, clientmetrics.ErrCompression):
		return kerr.UnsupportedCompressionType.Code
	case errors.Is(err, clientmetrics.ErrPayload):
		return kerr.InvalidRecord.Code
	}
	// ErrTerminated, ErrInstanceID
	return kerr.InvalidRequest.Code
}
