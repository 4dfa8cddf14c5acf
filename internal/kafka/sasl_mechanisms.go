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
	"encoding/base64"
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
func lookupCredential(db meta.Viewer, user string, m meta.ScramMechanism) (meta.ScramCredential, bool, error) {
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
	mech  meta.ScramMechanism
	conv  *scram.ServerConversation
	first bool
	// What the lenient final check needs: the first two messages and
	// the credential the conversation looked up.
	clientFirst, serverFirst string
	cred                     scram.StoredCredentials
}

func newScramExchange(m meta.ScramMechanism, db MetaDB) *scramExchange {
	x := &scramExchange{mech: m, first: true}
	srv, err := hashOf(m).NewServer(func(user string) (scram.StoredCredentials, error) {
		c, ok, err := lookupCredential(db, user, m)
		switch {
		case err != nil:
			return scram.StoredCredentials{}, err
		case !ok:
			return scram.StoredCredentials{}, errBadCredentials
		}
		x.cred = scram.StoredCredentials{
			KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)},
			StoredKey:  c.StoredKey,
			ServerKey:  c.ServerKey,
		}
		return x.cred, nil
	})
	if err != nil {
		// NewServer fails only for a nil lookup.
		panic(err)
	}
	x.conv = srv.NewConversation()
	return x
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
		x.clientFirst = string(in)
	} else if x.serverFirst != "" {
		if nonce, ours := scramAttr(string(in), "r"), scramAttr(x.serverFirst, "r"); nonce != ours && strings.HasSuffix(nonce, ours) {
			return x.finalLenient(string(in))
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
		x.serverFirst = resp
	}
	if !x.conv.Done() {
		return []byte(resp), "", false, nil
	}
	if !x.conv.Valid() {
		return nil, "", false, errBadCredentials
	}
	return []byte(resp), x.conv.Username(), true, nil
}

// finalLenient checks a client-final message whose nonce is the client's
// nonce followed by the whole server nonce, as librdkafka (kcat,
// confluent-kafka) sends it. Kafka accepts that (its ScramSaslServer
// asks only that the nonce end with the server's); xdg-go/scram wants
// the server nonce exactly, and the proof covers the message as sent,
// so the RFC 5802 check runs here: ClientKey = proof XOR
// HMAC(StoredKey, AuthMessage) must hash to StoredKey.
func (x *scramExchange) finalLenient(c2 string) (out []byte, user string, done bool, err error) {
	i := strings.LastIndex(c2, ",p=")
	if i < 0 {
		return nil, "", false, errBadCredentials
	}
	withoutProof := c2[:i]
	proof, err := base64.StdEncoding.DecodeString(c2[i+len(",p="):])
	gs2, bare, ok := splitClientFirst(x.clientFirst)
	switch {
	case err != nil, !ok, scramAttr(c2, "c") != base64.StdEncoding.EncodeToString([]byte(gs2)):
		return nil, "", false, errBadCredentials
	}
	h := newHashOf(x.mech)
	authMsg := []byte(bare + "," + x.serverFirst + "," + withoutProof)
	mac := hmac.New(h, x.cred.StoredKey)
	mac.Write(authMsg)
	sig := mac.Sum(nil)
	if len(proof) != len(sig) {
		return nil, "", false, errBadCredentials
	}
	for i := range sig {
		sig[i] ^= proof[i]
	}
	sum := h()
	sum.Write(sig)
	if !hmac.Equal(sum.Sum(nil), x.cred.StoredKey) {
		return nil, "", false, errBadCredentials
	}
	mac = hmac.New(h, x.cred.ServerKey)
	mac.Write(authMsg)
	return []byte("v=" + base64.StdEncoding.EncodeToString(mac.Sum(nil))), x.conv.Username(), true, nil
}

// scramAttr is the value of attribute name in a SCRAM message, "" if
// it has none.
func scramAttr(msg, name string) string {
	for _, f := range strings.Split(msg, ",") {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	return ""
}

// splitClientFirst splits a client-first message into its GS2 header
// ("n,," with the trailing comma) and the bare message.
func splitClientFirst(c1 string) (gs2, bare string, ok bool) {
	i := strings.Index(c1, ",")
	if i < 0 {
		return "", "", false
	}
	j := strings.Index(c1[i+1:], ",")
	if j < 0 {
		return "", "", false
	}
	return c1[:i+j+2], c1[i+j+2:], true
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
	ok, err := CheckPassword(x.db, user, password)
	if err != nil {
		return nil, "", false, err
	}
	if !ok {
		return nil, "", false, errBadCredentials
	}
	return nil, user, true, nil
}

// dummyCredential is what CheckPassword derives a key with for a user
// that has no credentials, so that the answer takes as long as for a
// known user with a wrong password: a quick refusal would tell which
// user names exist. Its iterations are those `strand user` and the
// bootstrap user get by default; its stored key matches no password.
var dummyCredential = meta.ScramCredential{
	Salt:       []byte("strand-no-such-user-salt"),
	Iterations: 8192,
	StoredKey:  make([]byte, sha512.Size),
}

// CheckPassword reports whether password is user's, by the SCRAM
// credentials in db's local copy: it derives the stored key from it
// with the strongest credential's salt and iterations, as a SCRAM
// client would, and compares in constant time. SASL PLAIN checks with
// it, and so does the schema registry's HTTP basic authentication
// (package agent), so both take the same users.
func CheckPassword(db meta.Viewer, user, password string) (bool, error) {
	c, m, found := dummyCredential, meta.ScramSHA512, false
	for _, mech := range []meta.ScramMechanism{meta.ScramSHA512, meta.ScramSHA256} {
		cred, ok, err := lookupCredential(db, user, mech)
		if err != nil {
			return false, err
		}
		if ok {
			c, m, found = cred, mech, true
			break
		}
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
	return hmac.Equal(sc.StoredKey, c.StoredKey) && found, nil
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
