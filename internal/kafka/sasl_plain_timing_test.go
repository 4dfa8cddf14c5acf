package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
)

// TestPlainUnknownUserTakesAsLong: PLAIN refuses a user with no
// credentials no faster than a known user with a wrong password, so the
// time of an answer does not tell which user names exist. Each side is
// the fastest of several tries, which machine noise only slows.
func TestPlainUnknownUserTakesAsLong(t *testing.T) {
	db := metatest.New(time.Now)
	for _, m := range meta.ScramMechanisms {
		c, err := NewScramCredential(saslUser, saslPassword, m, 8192)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Propose(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	fastest := func(user string) time.Duration {
		best := time.Duration(1 << 62)
		for range 7 {
			start := time.Now()
			_, _, _, err := (&plainExchange{db: db}).step([]byte("\x00" + user + "\x00wrong-password"))
			took := time.Since(start)
			if !errors.Is(err, errBadCredentials) {
				t.Fatalf("PLAIN as %s with a wrong password: %v, want %v", user, err, errBadCredentials)
			}
			best = min(best, took)
		}
		return best
	}
	known, unknown := fastest(saslUser), fastest("no-such-user")
	if unknown < known/2 {
		t.Errorf("an unknown user is refused in %v, a known one with a wrong password in %v: the time tells them apart", unknown, known)
	}
}
