package e2e

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/strandkafka/strand/internal/history"
)

// The history tests' fault schedule: a sequence of faults drawn from a
// seed, one at a time, each injected, held and healed, with a rest
// before the next. The same seed draws the same sequence (kinds,
// targets, lengths, rates); when each lands in the workload depends on
// the machine, as in any Jepsen run.

type faultKind string

const (
	// faultAgentKill kills an agent with SIGKILL and restarts it after
	// the hold.
	faultAgentKill faultKind = "agent-kill"
	// faultAgentPause stops an agent with SIGSTOP for the hold, longer
	// than its lease at times, so it wakes as a zombie.
	faultAgentPause faultKind = "agent-pause"
	// faultLogPause stops the log backend's server with SIGSTOP.
	faultLogPause faultKind = "log-pause"
	// faultLogKill kills the log backend's server with SIGKILL and
	// restarts it after the hold.
	faultLogKill faultKind = "log-kill"
	// faultObjErrors fails a share of object store requests, before
	// performing them or after (the reply lost).
	faultObjErrors faultKind = "objstore-errors"
	// faultObjLatency delays object store requests.
	faultObjLatency faultKind = "objstore-latency"
	// faultConnDrop resets the client connections of one agent (or all)
	// again and again through the hold.
	faultConnDrop faultKind = "conn-drop"
	// faultConnDelay slows the client connections of one agent (or
	// all).
	faultConnDelay faultKind = "conn-delay"
	// faultMemberRestart replaces a consumer group member, so its
	// group rebalances under whatever else is going on.
	faultMemberRestart faultKind = "member-restart"
)

// fault is one step of a schedule.
type fault struct {
	kind faultKind
	// rest is the wait before the fault, hold how long it lasts.
	rest, hold time.Duration
	// agent is the target agent's index; -1 is every agent (conn-drop
	// and conn-delay).
	agent int
	// rate is objstore-errors' failed share, after whether the failed
	// requests are performed first.
	rate  float64
	after bool
	// delay is the most objstore-latency delays a request, or what
	// conn-delay delays each chunk.
	delay time.Duration
	iso   history.Isolation
}

func (f fault) String() string {
	s := string(f.kind)
	switch f.kind {
	case faultAgentKill, faultAgentPause:
		s += fmt.Sprintf(" agent %d", f.agent+1)
	case faultConnDrop, faultConnDelay:
		if f.agent < 0 {
			s += " all agents"
		} else {
			s += fmt.Sprintf(" agent %d", f.agent+1)
		}
	case faultMemberRestart:
		s += " " + groupOf(f.iso)
	}
	switch f.kind {
	case faultObjErrors:
		s += fmt.Sprintf(" %.0f%%", 100*f.rate)
		if f.after {
			s += " after performing"
		}
	case faultObjLatency, faultConnDelay:
		s += fmt.Sprintf(" up to %v", f.delay)
	}
	if f.kind != faultMemberRestart {
		s += fmt.Sprintf(" for %v", f.hold)
	}
	return s
}

// schedule draws faults from a seed: first every kind once, in a
// shuffled order, so even a short run meets each; then kinds at random.
type schedule struct {
	rng    *rand.Rand
	kinds  []faultKind
	agents int
	// round is the kinds of the first round not yet drawn.
	round []faultKind
}

// newSchedule draws from seed the faults c can take: log-kill only on a
// backend that survives it, object store faults only on the S3 store.
func newSchedule(seed uint64, c *histCluster) *schedule {
	kinds := []faultKind{faultAgentKill, faultAgentPause, faultConnDrop, faultConnDelay, faultMemberRestart}
	if c.log.pause != nil {
		kinds = append(kinds, faultLogPause)
	}
	if c.log.kill != nil {
		kinds = append(kinds, faultLogKill)
	}
	if c.s3 != nil {
		kinds = append(kinds, faultObjErrors, faultObjLatency)
	}
	s := &schedule{rng: rand.New(rand.NewPCG(seed, 1)), kinds: kinds, agents: len(c.agents)}
	s.round = slices.Clone(kinds)
	s.rng.Shuffle(len(s.round), func(i, j int) { s.round[i], s.round[j] = s.round[j], s.round[i] })
	return s
}

// between draws a duration in [lo, hi), in 10 ms steps: fine enough
// for the delays too (20-200 ms in 100 ms steps drew 20 ms every time).
func (s *schedule) between(lo, hi time.Duration) time.Duration {
	const step = 10 * time.Millisecond
	return lo + time.Duration(s.rng.Int64N(int64((hi-lo)/step)))*step
}

func (s *schedule) next() fault {
	kind := s.kinds[s.rng.IntN(len(s.kinds))]
	if len(s.round) > 0 {
		kind, s.round = s.round[0], s.round[1:]
	}
	f := fault{kind: kind, rest: s.between(500*time.Millisecond, 3*time.Second), agent: s.rng.IntN(s.agents)}
	switch f.kind {
	case faultAgentKill, faultAgentPause, faultLogKill:
		f.hold = s.between(time.Second, 6*time.Second)
	case faultLogPause:
		f.hold = s.between(time.Second, 8*time.Second)
	case faultObjErrors:
		f.hold = s.between(2*time.Second, 8*time.Second)
		f.rate = []float64{0.3, 0.6, 1}[s.rng.IntN(3)]
		f.after = s.rng.IntN(2) == 0
	case faultObjLatency:
		f.hold = s.between(2*time.Second, 8*time.Second)
		f.delay = s.between(50*time.Millisecond, 400*time.Millisecond)
	case faultConnDrop, faultConnDelay:
		f.hold = s.between(time.Second, 6*time.Second)
		f.delay = s.between(20*time.Millisecond, 200*time.Millisecond)
		if s.rng.IntN(3) == 0 {
			f.agent = -1
		}
	case faultMemberRestart:
		f.iso = history.Isolation(s.rng.IntN(2))
	}
	return f
}

// nemesis injects faults into a cluster and its workload.
type nemesis struct {
	c *histCluster
	w *workload
	// injected counts the faults by kind.
	injected map[faultKind]int
	// lines is what was injected when, for the summary.
	lines []string
}

// run injects faults from s until d has passed, then heals the one in
// force. An agent or log server that does not come back fails the run.
func (n *nemesis) run(s *schedule, d time.Duration) error {
	n.injected = make(map[faultKind]int)
	deadline := time.Now().Add(d)
	wait := func(d time.Duration) { time.Sleep(min(d, max(0, time.Until(deadline)))) }
	for time.Now().Before(deadline) {
		f := s.next()
		wait(f.rest)
		if !time.Now().Before(deadline) {
			break
		}
		if err := n.c.log.check(); err != nil {
			return err
		}
		n.injected[f.kind]++
		n.lines = append(n.lines, fmt.Sprintf("%7.1fs %v", n.w.rec.now().Seconds(), f))
		if err := n.inject(f, wait); err != nil {
			return fmt.Errorf("%v: %w", f, err)
		}
	}
	return nil
}

// inject applies f, holds it (wait never outlasts the run), and heals
// it.
func (n *nemesis) inject(f fault, wait func(time.Duration)) error {
	c := n.c
	proxies := func() []*histAgent {
		if f.agent < 0 {
			return c.agents
		}
		return c.agents[f.agent : f.agent+1]
	}
	switch f.kind {
	case faultAgentKill:
		a := c.agents[f.agent]
		a.kill()
		wait(f.hold)
		return a.start()
	case faultAgentPause:
		a := c.agents[f.agent]
		a.pause()
		wait(f.hold)
		a.resume()
	case faultLogPause:
		c.log.pause()
		wait(f.hold)
		c.log.resume()
	case faultLogKill:
		c.log.kill()
		wait(f.hold)
		return c.log.restart()
	case faultObjErrors:
		c.s3.set(f.rate, f.after, 0)
		wait(f.hold)
		c.s3.set(0, false, 0)
	case faultObjLatency:
		c.s3.set(0, false, f.delay)
		wait(f.hold)
		c.s3.set(0, false, 0)
	case faultConnDrop:
		const every = 300 * time.Millisecond
		for range max(1, int(f.hold/every)) {
			for _, a := range proxies() {
				a.proxy.DropConns()
			}
			wait(every)
		}
	case faultConnDelay:
		for _, a := range proxies() {
			a.proxy.SetDelay(f.delay)
		}
		wait(f.hold)
		for _, a := range proxies() {
			a.proxy.SetDelay(0)
		}
	case faultMemberRestart:
		n.w.restartMember(f.iso)
	}
	return nil
}

// summary is the faults injected by kind, e.g. "agent-kill 3, log-pause 2".
func (n *nemesis) summary() string {
	var parts []string
	total := 0
	for _, k := range slices.Sorted(maps.Keys(n.injected)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, n.injected[k]))
		total += n.injected[k]
	}
	if total == 0 {
		return "none"
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}
