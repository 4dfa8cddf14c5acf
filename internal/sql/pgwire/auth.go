package pgwire

// Authentication. PostgreSQL's SCRAM-SHA-256 is SASL (RFC 5802, RFC
// 7677) carried in AuthenticationSASL/SASLContinue/SASLFinal messages;
// github.com/xdg-go/scram runs the server's side of the exchange over
// stored keys, so no password is ever held or seen here. PostgreSQL
// takes the user from the StartupMessage and ignores the one in the
// SCRAM message (libpq and pgx send it empty), and so does this server.
//
// SCRAM-SHA-256-PLUS (channel binding) is not offered: a client that
// could bind says so with the "y" flag, which the exchange accepts.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/xdg-go/scram"
)

// scramMechanism is the one SASL mechanism offered.
const scramMechanism = "SCRAM-SHA-256"

// AuthMethod is how a connection is authenticated.
type AuthMethod uint8

const (
	// AuthSCRAM asks for SCRAM-SHA-256 against Credentials.
	AuthSCRAM AuthMethod = iota
	// AuthTrust takes the user named in the StartupMessage as it is.
	AuthTrust
	// AuthRefuse refuses every connection with 28000.
	AuthRefuse
)

// Credential is a user's SCRAM-SHA-256 credential as RFC 5802 stores
// it: the salt and iteration count of the salted password, and the
// stored and server keys derived from it.
type Credential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// Auth decides, for each new connection, how it is authenticated; it is
// asked again per connection so a user created later takes effect at
// once.
type Auth interface {
	// Method is the method for a connection accepted on the listener
	// (with the reason, for AuthRefuse, the client is told).
	Method() (AuthMethod, string)
	// Credential returns user's SCRAM-SHA-256 credential, false if the
	// user has none.
	Credential(user string) (Credential, bool, error)
}

// mockIterations is what an unknown user's mock credential claims, the
// iteration count PostgreSQL's scram_iterations defaults to.
const mockIterations = 4096

// mockNonce keys the mock salts of unknown users: stable in a process,
// so asking twice for one user shows the same salt, as for a real user.
var mockNonce = func() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}()

// mockCredential is what an unknown user is asked to prove: a salt
// derived from the name and keys no password matches. PostgreSQL does
// the same ("mock authentication"), so the exchange looks alike for an
// unknown user and a wrong password, and the end is the same 28P01.
func mockCredential(user string) Credential {
	mac := hmac.New(sha256.New, mockNonce)
	mac.Write([]byte(user))
	sum := mac.Sum(nil)
	key := make([]byte, sha256.Size)
	rand.Read(key)
	return Credential{Salt: sum[:16], Iterations: mockIterations, StoredKey: key, ServerKey: key}
}

// errAuthFailed is any failed SCRAM exchange, told to the client as
// PostgreSQL tells it.
func errAuthFailed(user string) *Error {
	return Errorf(CodeInvalidPassword, "password authentication failed for user %q", user)
}

// scramAuth runs the SASL exchange for user on b. It returns an *Error
// for the client (28P01 for any failed proof) or a connection error.
func scramAuth(b *pgproto3.Backend, auth Auth, user string) error {
	var lookupErr error
	srv, err := scram.SHA256.NewServer(func(string) (scram.StoredCredentials, error) {
		c, ok, err := auth.Credential(user)
		if err != nil {
			lookupErr = err
			return scram.StoredCredentials{}, err
		}
		if !ok {
			c = mockCredential(user)
		}
		return scram.StoredCredentials{
			KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations},
			StoredKey:  c.StoredKey,
			ServerKey:  c.ServerKey,
		}, nil
	})
	if err != nil {
		return err
	}
	conv := srv.NewConversation()

	b.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{scramMechanism}})
	if err := b.SetAuthType(pgproto3.AuthTypeSASL); err != nil {
		return err
	}
	if err := b.Flush(); err != nil {
		return err
	}
	msg, err := b.Receive()
	if err != nil {
		return err
	}
	first, ok := msg.(*pgproto3.SASLInitialResponse)
	switch {
	case !ok:
		return Errorf(CodeProtocolViolation, "expected SASL response, got %T", msg)
	case first.AuthMechanism != scramMechanism:
		return Errorf(CodeProtocolViolation, "client selected an invalid SASL authentication mechanism")
	}
	serverFirst, err := conv.Step(string(first.Data))
	if lookupErr != nil {
		return fmt.Errorf("looking up %q's credential: %w", user, lookupErr)
	}
	if err != nil {
		return Errorf(CodeProtocolViolation, "malformed SCRAM message: %v", err)
	}
	b.Send(&pgproto3.AuthenticationSASLContinue{Data: []byte(serverFirst)})
	if err := b.SetAuthType(pgproto3.AuthTypeSASLContinue); err != nil {
		return err
	}
	if err := b.Flush(); err != nil {
		return err
	}
	if msg, err = b.Receive(); err != nil {
		return err
	}
	final, ok := msg.(*pgproto3.SASLResponse)
	if !ok {
		return Errorf(CodeProtocolViolation, "expected SASL response, got %T", msg)
	}
	serverFinal, err := conv.Step(string(final.Data))
	if err != nil || !conv.Valid() {
		// A wrong proof and an unknown user end alike.
		return errAuthFailed(user)
	}
	b.Send(&pgproto3.AuthenticationSASLFinal{Data: []byte(serverFinal)})
	return b.SetAuthType(pgproto3.AuthTypeOk)
}

// isClientError reports whether err is meant for the client.
func isClientError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
