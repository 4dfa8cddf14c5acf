package kafka

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

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

// TestScramLibrdkafkaNonce: librdkafka (kcat, confluent-kafka) sends a
// client-final nonce of its own nonce followed by the whole server
// nonce, and proves over that message; Kafka accepts it, so the agent
// must, while a wrong proof or a nonce not ending in the server's still
// fails. Before finalLenient, kcat's SCRAM exchanges failed with
// "nonce received did not match nonce sent".
func TestScramLibrdkafkaNonce(t *testing.T) {
	db := metatest.New(time.Now)
	c, err := NewScramCredential(saslUser, saslPassword, meta.ScramSHA512, meta.MinScramIterations)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Propose(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	// final builds librdkafka's client-final for a fresh exchange and
	// returns it with the server signature the client expects.
	final := func(t *testing.T, ex saslExchange, cnonce string) (c2wop string, proof []byte, serverSig string) {
		s1, _, _, err := ex.step([]byte("n,,n=" + saslUser + ",r=" + cnonce))
		if err != nil {
			t.Fatal(err)
		}
		salt, _ := base64.StdEncoding.DecodeString(scramAttr(string(s1), "s"))
		iters, _ := strconv.Atoi(scramAttr(string(s1), "i"))
		salted, err := pbkdf2.Key(sha512.New, saslPassword, salt, iters, sha512.Size)
		if err != nil {
			t.Fatal(err)
		}
		stored, server := scramKeys(meta.ScramSHA512, salted)
		mac := hmac.New(sha512.New, salted)
		mac.Write([]byte("Client Key"))
		clientKey := mac.Sum(nil)
		c2wop = "c=biws,r=" + cnonce + scramAttr(string(s1), "r")
		authMsg := "n=" + saslUser + ",r=" + cnonce + "," + string(s1) + "," + c2wop
		mac = hmac.New(sha512.New, stored)
		mac.Write([]byte(authMsg))
		proof = mac.Sum(nil)
		for i := range proof {
			proof[i] ^= clientKey[i]
		}
		mac = hmac.New(sha512.New, server)
		mac.Write([]byte(authMsg))
		return c2wop, proof, "v=" + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	}
	b64 := base64.StdEncoding.EncodeToString

	ex := newSASLExchange(MechanismScramSHA512, db)
	c2wop, proof, want := final(t, ex, "librdkafka-nonce")
	out, user, done, err := ex.step([]byte(c2wop + ",p=" + b64(proof)))
	if err != nil || !done || user != saslUser || string(out) != want {
		t.Fatalf("librdkafka's client-final: %q %q %v %v, want %q", out, user, done, err, want)
	}

	ex = newSASLExchange(MechanismScramSHA512, db)
	c2wop, proof, _ = final(t, ex, "librdkafka-nonce")
	proof[0] ^= 1
	if _, _, _, err := ex.step([]byte(c2wop + ",p=" + b64(proof))); err == nil {
		t.Fatal("a wrong proof in librdkafka's form authenticated")
	}

	ex = newSASLExchange(MechanismScramSHA512, db)
	c2wop, proof, _ = final(t, ex, "librdkafka-nonce")
	if _, _, _, err := ex.step([]byte(c2wop + "x,p=" + b64(proof))); err == nil {
		t.Fatal("a nonce not ending in the server's authenticated")
	}
}

// saslObserver records the keys of the requests a server answered.
type saslObserver struct {
	nopObserver
	mu   sync.Mutex
	keys []int16
}

func (o *saslObserver) RequestDone(_ *Conn, st RequestStats) {
	o.mu.Lock()
	o.keys = append(o.keys, st.Key)
	o.mu.Unlock()
}

// FuzzSASLConn feeds arbitrary bytes to a connection on a SASL listener
// after seeds that reach every state (handshake v0 and v1, framed and
// unframed tokens, requests before and during an exchange). The
// password is random per run, so no input can authenticate: the server
// must not panic, and must answer nothing but ApiVersions and the SASL
// APIs.
func FuzzSASLConn(f *testing.F) {
	pw := make([]byte, 16)
	rand.Read(pw)
	password := base64.StdEncoding.EncodeToString(pw)
	db := metatest.New(time.Now)
	for _, m := range meta.ScramMechanisms {
		c, err := NewScramCredential(saslUser, password, m, meta.MinScramIterations)
		if err != nil {
			f.Fatal(err)
		}
		if _, err := db.Propose(context.Background(), c); err != nil {
			f.Fatal(err)
		}
	}
	hs := func(v int16, mech string) []byte {
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Version, req.Mechanism = v, mech
		return frameFor(1, req)
	}
	auth := func(tok string) []byte {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 2, []byte(tok)
		return frameFor(2, req)
	}
	raw := func(tok string) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	f.Add(cat(hs(1, MechanismPlain), auth("\x00alice\x00guess"), frameFor(3, metadataV1())))
	f.Add(cat(hs(0, MechanismPlain), raw("\x00alice\x00guess"), frameFor(3, metadataV1())))
	f.Add(cat(hs(1, MechanismScramSHA256), auth("n,,n=alice,r=abc"), auth("c=biws,r=abc,p=AAAA")))
	f.Add(cat(hs(0, MechanismScramSHA512), raw("n,,n=alice,r=abc"), raw("c=biws,r=abc,p=AAAA")))
	f.Add(cat(frameFor(1, kmsg.NewPtrApiVersionsRequest()), frameFor(3, metadataV1())))
	f.Add(cat(hs(1, "GSSAPI"), hs(1, MechanismPlain)))
	f.Fuzz(func(t *testing.T, stream []byte) {
		synctest.Test(t, func(t *testing.T) {
			obs := &saslObserver{}
			s, err := New(Config{
				Logger:          discardLogger,
				MaxRequestBytes: 64 << 10,
				Observer:        obs,
				SASL:            SASLConfig{FailedAuthDelay: -1},
				Deps:            Deps{Meta: db},
			})
			if err != nil {
				t.Fatal(err)
			}
			client, server := net.Pipe()
			served := make(chan error, 1)
			go func() { served <- s.ServeConnOn(context.Background(), server, saslListener) }()
			go client.Write(stream)
			go io.Copy(io.Discard, client)
			synctest.Wait()
			client.Close()
			if reason := <-served; errors.Is(reason, ErrHandlerPanic) || errors.Is(reason, errDecoderPanic) {
				t.Fatalf("panic serving %q: %v", stream, reason)
			}
			obs.mu.Lock()
			defer obs.mu.Unlock()
			for _, k := range obs.keys {
				if k != apiVersionsKey && k != saslHandshakeKey && k != saslAuthenticateKey {
					t.Fatalf("key %d answered without authentication, stream %q", k, stream)
				}
			}
		})
	})
}
