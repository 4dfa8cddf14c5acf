package zktest

import (
	"errors"
	"testing"

	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// TestStartStop: a started ZooKeeper serves, and after Stop it no
// longer does.
func TestStartStop(t *testing.T) {
	s, err := Start()
	if errors.Is(err, testproc.ErrNoBinary) {
		testproc.SkipOrFail(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !serving(s.Addr()) {
		t.Fatalf("no answer from %s", s.Addr())
	}
	s.Stop()
	if serving(s.Addr()) {
		t.Fatalf("%s still answers after Stop", s.Addr())
	}
}
