package faultlog

import (
	"math/rand/v2"
	"sync"
	"time"
)

// RandomConfig sets the odds of each fault, per eligible operation.
type RandomConfig struct {
	// Ops are the operations eligible for faults; 0 means OpAll.
	Ops Op
	// FailBefore and FailAfter are probabilities in [0, 1]; they are
	// exclusive, FailBefore is drawn first.
	FailBefore, FailAfter float64
	// DelayProb is the probability of a delay, drawn independently of the
	// failure; the delay is uniform in [0, MaxDelay).
	DelayProb float64
	MaxDelay  time.Duration
}

// Random injects faults drawn from a seeded generator. With one caller at
// a time, a seed replays the same faults; with concurrent callers, the
// draws follow the order the calls arrive in.
type Random struct {
	cfg RandomConfig
	mu  struct {
		sync.Mutex
		rng *rand.Rand
	}
}

// NewRandom returns a Random injector seeded with seed.
func NewRandom(seed uint64, cfg RandomConfig) *Random {
	if cfg.Ops == 0 {
		cfg.Ops = OpAll
	}
	r := &Random{cfg: cfg}
	r.mu.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return r
}

func (r *Random) Fault(op Op) Fault {
	if r.cfg.Ops&op == 0 {
		return Fault{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var f Fault
	switch x := r.mu.rng.Float64(); {
	case x < r.cfg.FailBefore:
		f.Mode = FailBefore
	case x < r.cfg.FailBefore+r.cfg.FailAfter:
		f.Mode = FailAfter
	}
	if r.cfg.MaxDelay > 0 && r.mu.rng.Float64() < r.cfg.DelayProb {
		f.Delay = time.Duration(r.mu.rng.Int64N(int64(r.cfg.MaxDelay)))
	}
	return f
}

// Countdown fails the next n operations in a set with one Mode, then lets
// everything through: "the next 3 appends lose their reply".
type Countdown struct {
	ops  Op
	mode Mode
	mu   struct {
		sync.Mutex
		left int
	}
}

// FailNext returns a Countdown failing the next n operations in ops.
func FailNext(ops Op, n int, mode Mode) *Countdown {
	c := &Countdown{ops: ops, mode: mode}
	c.mu.left = n
	return c
}

// Arm sets the number of operations still to fail.
func (c *Countdown) Arm(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.left = n
}

// Remaining returns the number of operations still to fail.
func (c *Countdown) Remaining() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.left
}

func (c *Countdown) Fault(op Op) Fault {
	if c.ops&op == 0 {
		return Fault{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.left <= 0 {
		return Fault{}
	}
	c.mu.left--
	return Fault{Mode: c.mode}
}
