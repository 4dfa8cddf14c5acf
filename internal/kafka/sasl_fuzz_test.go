package kafka

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
)

// FuzzSASLExchange feeds two arbitrary tokens to each mechanism's
// server side over a database holding alice's credentials. No input
// may panic, and none may authenticate but PLAIN with alice's password:
// a SCRAM proof depends on the server's random nonce, which the input
// cannot know.
func FuzzSASLExchange(f *testing.F) {
	db := metatest.New(time.Now)
	for _, m := range meta.ScramMechanisms {
		c, err := NewScramCredential(saslUser, saslPassword, m, meta.MinScramIterations)
		if err != nil {
			f.Fatal(err)
		}
		if res, err := db.Propose(context.Background(), c); err != nil || res.Err() != nil {
			f.Fatalf("creating alice: %v %v", err, res.Err())
		}
	}
	plainOK := []byte("\x00" + saslUser + "\x00" + saslPassword)
	f.Add(uint8(0), plainOK, []byte(nil))
	f.Add(uint8(0), []byte("alice\x00alice\x00x"), []byte(nil))
	f.Add(uint8(0), []byte("\x00\x00"), []byte(nil))
	f.Add(uint8(1), []byte("n,,n=alice,r=abcdefgh"), []byte("c=biws,r=abcdefgh,p=AAAA"))
	f.Add(uint8(2), []byte("n,a=bob,n=alice,r=x,tokenauth=true"), []byte("c=,r=,p="))
	f.Add(uint8(2), []byte("y,,n=al=2Cice,r=1"), []byte{0xff, 0xfe})
	f.Add(uint8(1), []byte("p=tls-unique,,n=alice,r=1"), []byte(nil))
	f.Fuzz(func(t *testing.T, mech uint8, first, second []byte) {
		name := DefaultSASLMechanisms[int(mech)%len(DefaultSASLMechanisms)]
		ex := newSASLExchange(name, db)
		_, user, done, err := ex.step(first)
		if err == nil && !done {
			_, user, done, err = ex.step(second)
		}
		if err != nil || !done {
			return
		}
		if name != MechanismPlain || user != saslUser || !bytes.HasSuffix(first, []byte("\x00"+saslPassword)) {
			t.Fatalf("%s authenticated %q from %q, %q", name, user, first, second)
		}
	})
}
