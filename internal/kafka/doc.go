// Package kafka owns Strand's Kafka wire-protocol server: the listener, the
// per-connection loop (framing, header parsing, pipelining with in-order
// responses, limits and timeouts), the registry of API-key handlers, and
// dispatch to them. The business logic of each API lives in one file per API
// key (NN_name.go, for example 18_api_versions.go), registered with regKey;
// ApiVersions answers from that registry, never from a hand-kept list.
//
// Wire types come from kmsg; this package never encodes a message body by
// hand.
//
// # Connection lifecycle
//
// A connection accepted on a TLS listener (Listener.TLS, tls.go) first
// completes its handshake within Config.TLSHandshakeTimeout, or is
// closed with ErrTLSHandshake before any request is read; on an SSL
// listener a client certificate names its principal. On a SASL listener
// the reader admits only ApiVersions and the SASL APIs until the client
// authenticates, and reads SaslHandshake v0's unframed tokens (sasl.go).
// Then it is served by two goroutines, a reader and a writer, plus one
// goroutine per request while its handler runs:
//
//	reader: take a slot -> read frame -> parse header -> decode body -> queue -> go handler
//	writer: take the oldest queued request -> wait for its handler -> write -> free the slot
//
// Pipelining is bounded: a request holds one of Config.MaxInFlightPerConn
// slots from before its frame is read until its response is written. When
// they are all taken the reader stops reading the socket, so a client that
// does not read its responses gets TCP backpressure rather than unbounded
// buffering. Request bytes are also bounded across all connections by
// Config.MaxQueuedRequestBytes (Kafka's queued.max.request.bytes).
//
// # Fairness
//
// A frame's share of that budget grows as its bytes arrive, so a client
// announcing large frames and sending them slowly holds what it sent, not
// what it announced; frames still arriving may hold at most the budget
// less one largest frame, which keeps one of them always able to finish
// (see byteBudget). Each frame must arrive by a deadline fixed at its
// first byte (Config.FrameTimeout plus its size at MinFrameRate), however
// many bytes trickle in before it; a connection that misses it is closed
// (ErrFrameTimeout). At accept, a connection past Config.MaxConns, or past
// MaxConnsPerIP from its address (max.connections.per.ip and its
// overrides), is closed (ErrTooManyConns, ErrTooManyConnsPerIP); the
// three limits may be changed at runtime as dynamic broker configs,
// read at each accept (broker_limits.go). A connection idle for
// Config.IdleTimeout (connections.max.idle.ms) is closed too.
//
// # Bad input
//
// The server follows the Java broker, which answers a protocol violation by
// closing the connection (it throws InvalidReceiveException,
// InvalidRequestException or UnsupportedVersionException from the network
// layer and closes the channel):
//
//   - a frame size <= 0 or above Config.MaxRequestBytes: closed (ErrFrameSize);
//   - a frame too short for a request header, or a body that does not decode:
//     closed (ErrMalformedRequest);
//   - an API key kmsg does not know, or that no handler serves: closed
//     (ErrUnknownAPIKey);
//   - a version outside a served key's range: closed (ErrUnsupportedVersion),
//     except ApiVersions, which is answered at v0 with UNSUPPORTED_VERSION
//     and key 18's own range so the client can retry (KIP-511);
//   - a handler error or panic: closed.
//
// Each case affects only that connection; the server keeps serving others.
package kafka
