// SaslAuthenticate: v0-2
//   - Carries one token of the exchange SaslHandshake v1 started
//     (sasl.go); the last one's success sets the connection's principal
//     to User:<name>.
//   - A failed attempt is answered SASL_AUTHENTICATION_FAILED after the
//     failed-authentication delay, and the connection closed.
//   - v1+: SessionLifetimeMillis is connections.max.reauth.ms when set
//     (KIP-368); the session ends then, whatever the version.
//   - Also serves the unframed tokens that follow SaslHandshake v0: the
//     reader hands them here as v0 requests (Request.rawSASL), and a
//     failure closes the connection unanswered.
//   - On a listener without SASL: ILLEGAL_SASL_STATE, as Kafka answers.

package kafka

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(saslAuthenticateKey, 0, 2, handleSaslAuthenticate) }

func handleSaslAuthenticate(ctx context.Context, r *Request) (kmsg.Response, error) {
	req := r.Body.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	c := r.Conn
	if !c.listener.Protocol.SASL() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = strPtr("SaslAuthenticate on a listener without SASL")
		return resp, nil
	}
	var stepErr error
	var done bool
	err := r.InOrder(ctx, func() {
		var lifetime time.Duration
		resp.SASLAuthBytes, lifetime, done, stepErr = c.saslStep(r.Deps.Meta, req.SASLAuthBytes)
		resp.SessionLifetimeMillis = lifetime.Milliseconds()
	})
	switch {
	case err != nil:
		return nil, err
	case stepErr == nil:
		if done {
			c.srv.authThrottle.succeeded(c.ip)
		}
		return resp, nil
	}
	if errors.Is(stepErr, ErrMissingDeps) {
		return nil, stepErr
	}
	if errors.Is(stepErr, ErrAuthFailed) {
		// The connection's close reason logs the failure.
		sleepCtx(ctx, c.srv.authThrottle.failed(c.ip, c.srv.cfg.Deps.now()))
	}
	if r.rawSASL {
		// Nothing can carry the error: close, as Kafka does.
		return nil, stepErr
	}
	resp.SASLAuthBytes, resp.SessionLifetimeMillis = nil, 0
	resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
	if errors.Is(stepErr, ErrSASLState) {
		resp.ErrorCode = kerr.IllegalSaslState.Code
	}
	msg := stepErr.Error()
	resp.ErrorMessage = &msg
	r.closeAfterResponse(stepErr)
	return resp, nil
}
