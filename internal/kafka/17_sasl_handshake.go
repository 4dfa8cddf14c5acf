// SaslHandshake: v0-1
//   - Picks the connection's mechanism (sasl.go): one of the enabled
//     ones (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), listed in the answer.
//     An unknown one is answered UNSUPPORTED_SASL_MECHANISM and the
//     connection closed, as Kafka does.
//   - v0: the exchange's tokens follow unframed (kafka-python 2.0);
//     v1: they travel in SaslAuthenticate.
//   - On an authenticated connection it starts a re-authentication
//     (KIP-368), which keeps the mechanism and needs v1.
//   - On a listener without SASL: ILLEGAL_SASL_STATE, as Kafka answers.

package kafka

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(saslHandshakeKey, 0, 1, handleSaslHandshake) }

func handleSaslHandshake(ctx context.Context, r *Request) (kmsg.Response, error) {
	req := r.Body.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	c := r.Conn
	mechs := c.srv.cfg.SASL.Mechanisms
	resp.SupportedMechanisms = mechs
	if !c.listener.Protocol.SASL() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	}
	var e *kerr.Error
	var msg string
	if !slices.Contains(mechs, req.Mechanism) {
		e, msg = kerr.UnsupportedSaslMechanism, "mechanism "+req.Mechanism+" is not enabled"
	}
	err := r.InOrder(ctx, func() {
		if e == nil {
			e, msg = c.saslHandshake(req.Mechanism, req.Version)
		}
	})
	if err != nil {
		return nil, err
	}
	if e != nil {
		resp.ErrorCode = e.Code
		r.closeAfterResponse(fmt.Errorf("%w: SaslHandshake: %s", ErrSASLState, msg))
	}
	return resp, nil
}
