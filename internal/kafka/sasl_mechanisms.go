package kafka

// The SASL mechanisms' server sides. SCRAM (RFC 5802, RFC 7677) is
// github.com/xdg-go/scram's conversation over the credentials in the
// replicated database; PLAIN (RFC 4616) checks a password against the
// same credentials.

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"strings"

	"github.com/xdg-go/scram"

	"github.com/strandkafka/strand/internal/meta"
)

// errBadCredentials is what a client learns of any failed attempt:
// unknown user and wrong password look the same, as in Kafka.
var errBadCredentials = errors.New("invalid credentials")

func hashOf(m meta.ScramMechanism) scram.HashGeneratorFcn {
	if m == meta.ScramSHA512 {
		return scram.SHA512
	}
	return scram.SHA256
}

func newHashOf(m meta.ScramMechanism) func() hash.Hash {
	if m == meta.ScramSHA512 {
		return sha512.New
	}
	return sha256.New
}

// lookupCredential reads user's credential for m from db's local copy.
func lookupCredential(db MetaDB, user string, m meta.ScramMechanism) (meta.ScramCredential, bool, error) {
	if db == nil {
		return meta.ScramCredential{}, false, ErrMissingDeps
	}
	v := db.View()
	defer v.Close()
	return v.ScramCredential(user, m)
}

// scramExchange is a SCRAM server conversation: client-first, then
// client-final.
type scramExchange struct {
	conv  *scram.ServerConversation
	first bool
}

func newScramExchange(m meta.ScramMechanism, db MetaDB) *scramExchange {
	srv, err := hashOf(m).NewServer(func(user string) (scram.StoredCredentials, error) {
		c, ok, err := lookupCredential(db, user, m)
		switch {
		case err != nil:
			return scram.StoredCredentials{}, err
		case !ok:
			return scram.StoredCredentials{}, errBadCredentials
		}
		return scram.StoredCredentials{
			KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)},
			StoredKey:  c.StoredKey,
			ServerKey:  c.ServerKey,
		}, nil
	})
	if err != nil {
		// NewServer fails only for a nil lookup.
		panic(err)
	}
	return &scramExchange{conv: srv.NewConversation(), first: true}
}

func (x *scramExchange) step(in []byte) (out []byte, user string, done bool, err error) {
	first := x.first
	x.first = false
	if first {
		// Kafka's extensions follow the nonce; tokenauth asks for a
		// delegation token, which this build does not issue.
		if f := strings.Split(string(in), ","); len(f) > 4 {
			for _, ext := range f[4:] {
				if strings.HasPrefix(ext, "tokenauth=") {
					return nil, "", false, errors.New("delegation tokens are not supported")
				}
			}
		}
	}
	resp, err := x.conv.Step(string(in))
	if err != nil {
		return nil, "", false, errBadCredentials
	}
	if first {
		if a := x.conv.AuthzID(); a != "" && a != x.conv.Username() {
			return nil, "", false, errors.New("authorization id differs from the user name")
		}
	}
	if !x.conv.Done() {
		return []byte(resp), "", false, nil
	}
	if !x.conv.Valid() {
		return nil, "", false, errBadCredentials
	}
	return []byte(resp), x.conv.Username(), true, nil
}

// plainExchange checks "authzid NUL user NUL password" in one step.
type plainExchange struct {
	db MetaDB
}

func (x *plainExchange) step(in []byte) (out []byte, user string, done bool, err error) {
	parts := bytes.Split(in, []byte{0})
	if len(parts) != 3 {
		return nil, "", false, fmt.Errorf("PLAIN message has %d fields, want 3", len(parts))
	}
	authz, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	switch {
	case user == "" || password == "":
		return nil, "", false, errors.New("empty user name or password")
	case authz != "" && authz != user:
		return nil, "", false, errors.New("authorization id differs from the user name")
	}
	ok, err := checkPassword(x.db, user, password)
	if err != nil {
		return nil, "", false, err
	}
	if !ok {
		return nil, "", false, errBadCredentials
	}
	return nil, user, true, nil
}

// checkPassword reports whether password is user's: it derives the
// stored key from it with the strongest credential's salt and
// iterations, as a SCRAM client would, and compares in constant time.
func checkPassword(db MetaDB, user, password string) (bool, error) {
	for _, m := range []meta.ScramMechanism{meta.ScramSHA512, meta.ScramSHA256} {
		c, ok, err := lookupCredential(db, user, m)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		// Unprepped: Kafka's clients and kadm salt the password's UTF-8
		// bytes without SASLprep, so the stored keys were made that way.
		cl, err := hashOf(m).NewClientUnprepped(user, password, "")
		if err != nil {
			return false, nil
		}
		sc, err := cl.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)})
		if err != nil {
			return false, nil
		}
		return hmac.Equal(sc.StoredKey, c.StoredKey), nil
	}
	return false, nil
}

// scramKeys derives the stored and server keys of a salted password
// (RFC 5802): what AlterUserScramCredentials turns the salted password
// it carries into, so neither it nor the password reaches the log.
func scramKeys(m meta.ScramMechanism, saltedPassword []byte) (storedKey, serverKey []byte) {
	h := newHashOf(m)
	mac := hmac.New(h, saltedPassword)
	mac.Write([]byte("Client Key"))
	clientKey := mac.Sum(nil)
	sum := h()
	sum.Write(clientKey)
	storedKey = sum.Sum(nil)
	mac = hmac.New(h, saltedPassword)
	mac.Write([]byte("Server Key"))
	return storedKey, mac.Sum(nil)
}

// DefaultScramSaltBytes is the salt size NewScramCredential draws, as
// Kafka's ScramFormatter and kadm do.
const DefaultScramSaltBytes = 24

// NewScramCredential makes the command that sets user's credential for
// mechanism m from password, with a random salt: what an agent's
// bootstrap user is created with.
func NewScramCredential(user, password string, m meta.ScramMechanism, iterations int32) (meta.AlterScramCredential, error) {
	salt := make([]byte, DefaultScramSaltBytes)
	if _, err := rand.Read(salt); err != nil {
		return meta.AlterScramCredential{}, err
	}
	cl, err := hashOf(m).NewClientUnprepped(user, password, "")
	if err != nil {
		return meta.AlterScramCredential{}, err
	}
	sc, err := cl.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: int(iterations)})
	if err != nil {
		return meta.AlterScramCredential{}, err
	}
	return meta.AlterScramCredential{User: user, Mechanism: m, Iterations: iterations, Salt: salt,
		StoredKey: sc.StoredKey, ServerKey: sc.ServerKey}, nil
}
