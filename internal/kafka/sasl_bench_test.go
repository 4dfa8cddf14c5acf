package kafka

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
)

// BenchmarkSASLExchange is the server's CPU per successful
// authentication, per mechanism, at Kafka's lowest and highest SCRAM
// iteration counts. A SCRAM server computes two HMACs and a hash however
// many iterations the credential has (the client derives the key; its
// part is outside the timer); PLAIN derives the key on the server, so
// its cost grows with the iterations.
func BenchmarkSASLExchange(b *testing.B) {
	mechs := map[string]meta.ScramMechanism{MechanismScramSHA256: meta.ScramSHA256, MechanismScramSHA512: meta.ScramSHA512}
	for _, iters := range []int32{meta.MinScramIterations, meta.MaxScramIterations} {
		db := metatest.New(time.Now)
		for _, m := range meta.ScramMechanisms {
			c, err := NewScramCredential(saslUser, saslPassword, m, iters)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := db.Propose(context.Background(), c); err != nil {
				b.Fatal(err)
			}
		}
		for _, mech := range DefaultSASLMechanisms {
			b.Run(mech+"/iterations="+strconv.Itoa(int(iters)), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					ex := newSASLExchange(mech, db)
					if mech == MechanismPlain {
						if _, _, done, err := ex.step([]byte("\x00" + saslUser + "\x00" + saslPassword)); err != nil || !done {
							b.Fatalf("PLAIN: %v", err)
						}
						continue
					}
					b.StopTimer()
					conv := newScramClient(b, mechs[mech], saslUser, saslPassword)
					c1, _ := conv.Step("")
					b.StartTimer()
					s1, _, _, err := ex.step([]byte(c1))
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					c2, err := conv.Step(string(s1))
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if _, _, done, err := ex.step([]byte(c2)); err != nil || !done {
						b.Fatalf("%s: %v", mech, err)
					}
				}
			})
		}
	}
}
