// PushTelemetry: v0 (KIP-714 client telemetry)
//   - The push is checked and its OTLP metrics taken by Deps.Telemetry
//     (package clientmetrics), which re-exports them on /metrics labelled
//     with the client instance id and the request's client id.
//   - Errors as Kafka's ClientMetricsManager: a subscription id other
//     than the one this configuration gives the instance is
//     UNKNOWN_SUBSCRIPTION_ID (the client asks for its subscription
//     again); a payload above TelemetryMaxBytes, compressed or not,
//     TELEMETRY_TOO_LARGE; a compression type not offered
//     UNSUPPORTED_COMPRESSION_TYPE; a payload that does not decompress
//     or decode INVALID_RECORD; a push after a terminating one, or with
//     the zero instance id, INVALID_REQUEST; a second push within half
//     the push interval THROTTLING_QUOTA_EXCEEDED (a terminating push
//     is never early).
//   - ACLs: none, as Kafka: any client that authenticated may push.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/clientmetrics"
)

func init() { regKey(72, 0, 0, handlePushTelemetry) }

func handlePushTelemetry(_ context.Context, r *Request) (kmsg.Response, error) {
	req := r.Body.(*kmsg.PushTelemetryRequest)
	resp := req.ResponseKind().(*kmsg.PushTelemetryResponse)
	p := clientmetrics.Push{
		InstanceID:     req.ClientInstanceID,
		SubscriptionID: req.SubscriptionID,
		Terminating:    req.Terminating,
		Compression:    req.CompressionType,
		Metrics:        req.Metrics,
	}
	if r.ClientID != nil {
		p.ClientID = *r.ClientID
	}
	resp.ErrorCode = telemetryErrorCode(r.Deps.telemetry().Push(p))
	return resp, nil
}
