package meta

// SCRAM credentials (RFC 5802, KIP-554): per user and mechanism, the
// salt, the iteration count and the two keys a server needs to check a
// client's proof and prove itself (StoredKey = H(HMAC(SaltedPassword,
// "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key")). The
// password and the salted password are never stored, nor written to the
// log: AlterUserScramCredentials carries the salted password and the
// Kafka layer turns it into the keys before proposing. Every agent reads
// them from its copy, so a user created through one agent can
// authenticate on any agent once that agent has applied the command.

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// prefixScram keys one SCRAM credential: user, a 0 byte, mechanism. The
// user holds no 0 byte (apply refuses it), so a user's credentials are
// contiguous and users sort by name.
const prefixScram byte = 0x22

// TypeAlterScramCredential is type 23, written from metadata level 4.
const TypeAlterScramCredential CommandType = 23

// ScramMechanism is Kafka's id of a SCRAM mechanism, as
// AlterUserScramCredentials and DescribeUserScramCredentials carry it.
type ScramMechanism uint8

const (
	ScramSHA256 ScramMechanism = 1
	ScramSHA512 ScramMechanism = 2
)

// ScramMechanisms lists the mechanisms this build knows, by id.
var ScramMechanisms = []ScramMechanism{ScramSHA256, ScramSHA512}

// String is the SASL mechanism name, "SCRAM-SHA-256".
func (m ScramMechanism) String() string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return fmt.Sprintf("ScramMechanism(%d)", uint8(m))
}

// ParseScramMechanism parses a SASL mechanism name in any case.
func ParseScramMechanism(s string) (ScramMechanism, bool) {
	for _, m := range ScramMechanisms {
		if strings.EqualFold(s, m.String()) {
			return m, true
		}
	}
	return 0, false
}

// KeyBytes is the size of the mechanism's hash: the length of a salted
// password, a stored key and a server key. Zero for an unknown one.
func (m ScramMechanism) KeyBytes() int {
	switch m {
	case ScramSHA256:
		return 32
	case ScramSHA512:
		return 64
	}
	return 0
}

// Limits apply enforces. The iteration bounds are Kafka's (4096 is the
// minimum RFC 7677 asks for; Kafka refuses more than 16384, which bounds
// the work one authentication costs an agent). Like apply's other limits
// they are part of what apply means.
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
	// MaxScramUserBytes bounds a user name.
	MaxScramUserBytes = 512
	// MaxScramSaltBytes bounds a salt.
	MaxScramSaltBytes = 256
)

// ScramCredential is one user's credential for one mechanism.
type ScramCredential struct {
	User       string
	Mechanism  ScramMechanism
	Iterations int32
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
}

// AlterScramCredential sets User's credential for Mechanism (Iterations,
// Salt, StoredKey and ServerKey), or deletes it (Delete; the other
// fields are then empty).
// Result: UNSUPPORTED_SASL_MECHANISM for a mechanism other than 1 and
// 2; UNACCEPTABLE_CREDENTIAL for an empty user, one with a 0 byte or
// longer than MaxScramUserBytes, iterations outside
// [MinScramIterations, MaxScramIterations], an empty or too long salt,
// keys not of the mechanism's hash size, or a delete that carries any
// of them; RESOURCE_NOT_FOUND for deleting a credential that does not
// exist. Each changes nothing.
type AlterScramCredential struct {
	User       string
	Mechanism  ScramMechanism
	Delete     bool
	Iterations int32
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
}

func (AlterScramCredential) Type() CommandType { return TypeAlterScramCredential }
func (AlterScramCredential) version() uint16   { return 1 }

func (c AlterScramCredential) appendPayload(b []byte) []byte {
	b = appendString(b, c.User)
	b = append(b, byte(c.Mechanism))
	b = appendBool(b, c.Delete)
	b = appendVarint(b, int64(c.Iterations))
	b = appendBytes(b, c.Salt)
	b = appendBytes(b, c.StoredKey)
	return appendBytes(b, c.ServerKey)
}

func decodeAlterScramCredentialV1(p []byte) (AlterScramCredential, error) {
	r := &reader{b: p}
	var c AlterScramCredential
	c.User = r.string()
	var m [1]byte
	r.fixed(m[:])
	c.Mechanism = ScramMechanism(m[0])
	c.Delete = r.bool()
	c.Iterations = r.int32()
	c.Salt = r.bytesCopy()
	c.StoredKey = r.bytesCopy()
	c.ServerKey = r.bytesCopy()
	return c, r.done()
}

func scramKey(user string, m ScramMechanism) []byte {
	k := make([]byte, 0, len(user)+3)
	k = append(k, prefixScram)
	k = append(k, user...)
	return append(k, 0, byte(m))
}

// validScramUser reports whether user can be stored: not empty, no 0
// byte (the key's separator, and PLAIN's), not too long.
func validScramUser(user string) bool {
	return user != "" && len(user) <= MaxScramUserBytes && strings.IndexByte(user, 0) < 0
}

func (a *Applier) alterScramCredential(c AlterScramCredential) (Result, error) {
	n := c.Mechanism.KeyBytes()
	switch {
	case n == 0:
		return failed(kerr.UnsupportedSaslMechanism, "unknown SCRAM mechanism %d", c.Mechanism), nil
	case !validScramUser(c.User):
		return failed(kerr.UnacceptableCredential, "user name is empty, too long or holds a 0 byte"), nil
	}
	key := scramKey(c.User, c.Mechanism)
	if c.Delete {
		if c.Iterations != 0 || len(c.Salt)+len(c.StoredKey)+len(c.ServerKey) != 0 {
			return failed(kerr.UnacceptableCredential, "a deletion carries a credential"), nil
		}
		_, ok, err := a.get(key)
		switch {
		case err != nil:
			return Result{}, err
		case !ok:
			return failed(kerr.ResourceNotFound, "no %v credential for user", c.Mechanism), nil
		}
		return Result{}, a.b.Delete(key)
	}
	switch {
	case c.Iterations < MinScramIterations || c.Iterations > MaxScramIterations:
		return failed(kerr.UnacceptableCredential, "%d iterations, want %d to %d",
			c.Iterations, MinScramIterations, MaxScramIterations), nil
	case len(c.Salt) == 0 || len(c.Salt) > MaxScramSaltBytes:
		return failed(kerr.UnacceptableCredential, "%d-byte salt, want 1 to %d", len(c.Salt), MaxScramSaltBytes), nil
	case len(c.StoredKey) != n || len(c.ServerKey) != n:
		return failed(kerr.UnacceptableCredential, "%v keys are %d bytes", c.Mechanism, n), nil
	}
	v := []byte{recordV1}
	v = appendVarint(v, int64(c.Iterations))
	v = appendBytes(v, c.Salt)
	v = appendBytes(v, c.StoredKey)
	v = appendBytes(v, c.ServerKey)
	return Result{}, a.b.Set(key, v)
}

// decodeScramCredential decodes the record of key k; the key gives the
// user and mechanism.
func decodeScramCredential(k, v []byte) (ScramCredential, error) {
	if len(k) < 3 || k[0] != prefixScram || k[len(k)-2] != 0 {
		return ScramCredential{}, corrupt("scram key", errRange)
	}
	c := ScramCredential{User: string(k[1 : len(k)-2]), Mechanism: ScramMechanism(k[len(k)-1])}
	r := recordReader(v)
	c.Iterations = r.int32()
	c.Salt = r.bytesCopy()
	c.StoredKey = r.bytesCopy()
	c.ServerKey = r.bytesCopy()
	if err := r.done(); err != nil {
		return ScramCredential{}, corrupt("scram credential", err)
	}
	return c, nil
}

// ScramCredential returns user's credential for mechanism m; false if
// there is none.
func (v *View) ScramCredential(user string, m ScramMechanism) (ScramCredential, bool, error) {
	if !validScramUser(user) {
		return ScramCredential{}, false, nil
	}
	k := scramKey(user, m)
	val, ok, err := v.r.Get(k)
	if err != nil || !ok {
		return ScramCredential{}, false, err
	}
	c, err := decodeScramCredential(k, val)
	return c, err == nil, err
}

// ScramCredentials returns the credentials of user, or of every user
// when user is "", sorted by user and mechanism.
func (v *View) ScramCredentials(user string) ([]ScramCredential, error) {
	lower, upper := []byte{prefixScram}, []byte{prefixScram + 1}
	if user != "" {
		if !validScramUser(user) {
			return nil, nil
		}
		lower = append(append(lower, user...), 0)
		upper = append(bytes.Clone(lower[:len(lower)-1]), 1)
	}
	it, err := v.r.NewIter(lower, upper)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var cs []ScramCredential
	for ok := it.First(); ok; ok = it.Next() {
		c, err := decodeScramCredential(it.Key(), it.Value())
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, it.Error()
}
