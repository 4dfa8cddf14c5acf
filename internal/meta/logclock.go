package meta

// The log clock (metadata level 5): the time apply decides by, which no
// single agent can move far.
//
// Apply has no clock of its own; time reaches it as each entry's
// timestamp, stamped by the proposer's clock. Below level 5 the log
// clock is the largest timestamp any entry carried, so one agent whose
// clock runs a day ahead (a VM resumed from suspend, a broken NTP step)
// moves every copy a day ahead for good: retention deletes what was
// acknowledged a second ago, transactions time out, leases end, dead
// objects are deleted at once. From level 5 the live agents vote:
//
//   - Each registered agent with a live lease is a voice (0x20). Its
//     report is the timestamp of its newest entry; between entries the
//     report ages by the time the other voices' entries measured on
//     their own clocks (each entry's advance over its writer's previous
//     one, capped at a third of a lease, shared among the other voices).
//     Differences of one clock are rates, which skew does not touch, so
//     an idle voice's report keeps up with the time, and a dead one's
//     as well, without anyone comparing two clocks.
//   - The log clock may advance to an entry's timestamp only as far as
//     the lead past the lower median of the live voices' reports: at
//     most ClockLeadMs, and a quarter of the shortest lease among them,
//     so that running ahead by the lead ends no lease a live agent
//     renews.
//     An agent ahead of the others cannot move it further than that; an
//     agent behind them cannot hold it back, unless half the voices are
//     behind (with two agents, the slower one rules: of two clocks that
//     disagree, apply cannot tell which is right, and running late only
//     delays deletion).
//   - Any entry of an agent renews its voice (not its lease), so after
//     the log was down for longer than the leases the first entries,
//     which move the clock past every lease renewed before, leave the
//     voices of the agents that wrote counting.
//   - A voice quiet for clockQuietLeases of its leases (by that measure)
//     stops counting before its lease ends, so a dead agent never holds
//     the clock; an agent whose lease ended is dropped.
//   - With no voice (a new log before its first registration, or every
//     agent gone) the entry's timestamp moves the clock as below level 5.
//
// The clock never moves back. An agent learns how far its own clock is
// from the log's by comparing them after its own heartbeat applied; one
// that differs by more than its bound stops proposing time-based
// decisions (package agent).

import (
	"slices"
	"strings"
)

// prefixClockVoices keys the one record of the live agents' clock
// reports.
const prefixClockVoices byte = 0x20

var keyClockVoices = []byte{prefixClockVoices}

// Bounds of the log clock from level 5. Like apply's other limits they
// are part of what apply means.
const (
	// ClockLeadMs is the most the log clock may run ahead of the lower
	// median of the live agents' clocks (less with short leases): the
	// most one agent ahead of the others moves it. It is small next to anything the clock decides
	// (transaction timeouts of seconds to minutes, a GC grace of
	// minutes, retention of hours), and above the few milliseconds an
	// idle voice's report lags.
	ClockLeadMs int64 = 5000
	// clockLeadPerLease keeps the lead a quarter of the shortest lease
	// among the voices: the clock running the lead ahead of the agents'
	// own time must not end a lease that its agent renews every third
	// of it.
	clockLeadPerLease = 4
	// clockCreditPerLease caps what one entry credits to the other
	// voices' reports at a third of a lease (the writer's, and the
	// credited voice's): a jump, a third of a lease between renewals and
	// the lead (a quarter) stay short of the lease.
	clockCreditPerLease = 3
	// clockQuietLeases is how many of its leases a voice may go without
	// an entry, as the others measure time, before it stops counting: a
	// live agent renews every third of a lease.
	clockQuietLeases = 2
	// maxClockVoices bounds the voices: node ids are int32, but a
	// cluster of more agents than this has no use for more voices.
	maxClockVoices = 1024
)

// clockVoice is one live agent's say in the log clock.
type clockVoice struct {
	AgentID string
	// T is the timestamp (unix ms, its own clock) of its newest entry.
	T int64
	// Pos is the log position of that entry.
	Pos uint64
	// QuietMs is the time the other voices measured since that entry:
	// what passed on their clocks between entries of theirs that came
	// after it.
	QuietMs int64
	// LeaseMs and Expires are its lease, as in AgentInfo.
	LeaseMs int64
	Expires int64
}

// report is what the voice says the time is now.
func (v *clockVoice) report() int64 { return satAdd(v.T, v.QuietMs) }

// counts reports whether v takes part in the vote at log clock clock.
func (v *clockVoice) counts(clock int64) bool {
	return v.Expires > clock && v.QuietMs <= clockQuietLeases*v.LeaseMs
}

// level5On reports whether the finalized metadata level is 5 or more:
// the log clock is voted, and dead objects record where they died.
func (a *Applier) level5On() (bool, error) {
	if _, err := a.lifecycleOn(); err != nil {
		return false, err
	}
	return a.level >= MetadataLevel5, nil
}

// loadVoices reads the voices into the applier's cache, once per batch.
func (a *Applier) loadVoices() error {
	if a.voicesLoaded {
		return nil
	}
	v, ok, err := a.get(keyClockVoices)
	if err != nil {
		return err
	}
	a.voices = a.voices[:0]
	if ok {
		if a.voices, err = decodeClockVoices(v, a.voices); err != nil {
			return err
		}
	}
	a.voicesLoaded = true
	return nil
}

// advanceClock moves the log clock for an entry of writer stamped ts.
func (a *Applier) advanceClock(writer string, ts int64) error {
	on, err := a.level5On()
	if err != nil {
		return err
	}
	if !on {
		a.clock = max(a.clock, ts)
		return nil
	}
	if err := a.loadVoices(); err != nil {
		return err
	}
	if w := a.voiceIndex(writer); w >= 0 {
		v := &a.voices[w]
		// Its own clock's advance since its last entry: a rate, which
		// skew does not touch. Capped at a third of its lease (what a
		// writer renewing on time measures between renewals), so one
		// clock's jump (a step, a resume) counts for little: a voice
		// renewing every third of its own lease, credited the jump on
		// top of the time since and led by the lead (a quarter), stays
		// short of its lease's end (credits are capped at that voice's
		// third too). A cap of a whole lease let one agent's resume end
		// the others' leases.
		elapsed := min(max(ts-v.T, 0), v.LeaseMs/clockCreditPerLease)
		// Credited to the voices not heard from since its last entry,
		// which all passed after theirs; a voice that wrote in between
		// gets nothing, since how much of the time came after its
		// entry is unknown. So a report only ever understates the time
		// since. Shared among the other live voices: each of them
		// writes too, and their advances together measure the time
		// once.
		others := int64(0)
		for i := range a.voices {
			if i != w && a.voices[i].Expires > a.clock {
				others++
			}
		}
		elapsed /= max(others, 1)
		for i := range a.voices {
			if o := &a.voices[i]; i != w && o.Pos < v.Pos {
				o.QuietMs = satAdd(o.QuietMs, min(elapsed, o.LeaseMs/clockCreditPerLease))
			}
		}
		v.T, v.QuietMs, v.Pos = ts, 0, a.pos
		a.voicesDirty = true
	}
	w := a.voiceIndex(writer)
	reports := a.reportBuf[:0]
	lead := ClockLeadMs
	for i := range a.voices {
		// The writer counts whatever its lease says: it is writing.
		if v := &a.voices[i]; v.counts(a.clock) || i == w {
			reports = append(reports, v.report())
			lead = min(lead, v.LeaseMs/clockLeadPerLease)
		}
	}
	a.reportBuf = reports
	if len(reports) == 0 {
		a.clock = max(a.clock, ts)
		return nil
	}
	slices.Sort(reports)
	median := reports[(len(reports)-1)/2]
	a.clock = max(a.clock, min(ts, satAdd(median, lead)))
	if w >= 0 {
		// Any entry renews its writer's voice (not its lease: that is
		// the agent table's). After the log was down for longer than
		// the leases, the first entries move the clock past every
		// lease renewed before; without this, a voice whose agent
		// wrote since would stop counting until its renewal landed,
		// and an agent ahead of the rest, alone, would take the clock.
		v := &a.voices[w]
		v.Expires = max(v.Expires, satAdd(a.clock, v.LeaseMs))
		a.voicesDirty = true
	}
	return nil
}

// findVoice is where agent's voice is in the sorted voices, or would
// be, and whether it is there.
func (a *Applier) findVoice(agent string) (int, bool) {
	return slices.BinarySearchFunc(a.voices, agent, func(v clockVoice, id string) int {
		return strings.Compare(v.AgentID, id)
	})
}

// voiceIndex is the index of agent's voice, or -1.
func (a *Applier) voiceIndex(agent string) int {
	if i, ok := a.findVoice(agent); ok {
		return i
	}
	return -1
}

// heartbeatVoice records an applied AgentHeartbeat: the agent's voice
// is renewed (or made) with the entry's timestamp ts and the lease info
// gives; left, when not "", is an agent whose registration ended
// (it left, or its node id was taken over).
func (a *Applier) heartbeatVoice(info AgentInfo, ts int64, left string) error {
	on, err := a.level5On()
	if err != nil || !on {
		return err
	}
	if err := a.loadVoices(); err != nil {
		return err
	}
	a.voicesDirty = true
	if left != "" {
		if i := a.voiceIndex(left); i >= 0 {
			a.voices = slices.Delete(a.voices, i, i+1)
		}
	}
	if info.AgentID == "" {
		return nil
	}
	// Voices whose lease ended go first, so the table holds only what
	// can still count.
	a.voices = slices.DeleteFunc(a.voices, func(v clockVoice) bool { return v.Expires <= a.clock })
	nv := clockVoice{AgentID: info.AgentID, T: ts, Pos: a.pos, LeaseMs: info.LeaseMs, Expires: info.Expires}
	i, found := a.findVoice(info.AgentID)
	switch {
	case found:
		a.voices[i] = nv
	case len(a.voices) < maxClockVoices:
		a.voices = slices.Insert(a.voices, i, nv)
	}
	// Past maxClockVoices a new agent is served, not heard.
	return nil
}

// flushVoices writes the voices if they changed.
func (a *Applier) flushVoices() error {
	if !a.voicesDirty {
		return nil
	}
	a.voicesDirty = false
	if len(a.voices) == 0 {
		return a.b.Delete(keyClockVoices)
	}
	return a.b.Set(keyClockVoices, encodeClockVoices(a.voices))
}

func encodeClockVoices(vs []clockVoice) []byte {
	b := []byte{recordV1}
	b = appendUvarint(b, uint64(len(vs)))
	for _, v := range vs {
		b = appendString(b, v.AgentID)
		b = appendVarint(b, v.T)
		b = appendUvarint(b, v.Pos)
		b = appendVarint(b, v.QuietMs)
		b = appendVarint(b, v.LeaseMs)
		b = appendVarint(b, v.Expires)
	}
	return b
}

// decodeClockVoices appends the voices in v to dst.
func decodeClockVoices(v []byte, dst []clockVoice) ([]clockVoice, error) {
	r := recordReader(v)
	// Each takes at least six bytes: a string length and five varints.
	n := r.count(6)
	for i := 0; i < n && r.err == nil; i++ {
		dst = append(dst, clockVoice{AgentID: r.string(), T: r.varint(), Pos: r.uvarint(), QuietMs: r.varint(), LeaseMs: r.varint(), Expires: r.varint()})
	}
	if err := r.done(); err != nil {
		return nil, corrupt("clock voices", err)
	}
	return dst, nil
}

// ClockVoice is one live agent's report as a View returns it.
type ClockVoice struct {
	AgentID string
	// Report is what the agent's clock says the time is (unix ms): its
	// newest entry's timestamp plus the time the others measured since.
	Report int64
	// Counts: it takes part in the vote (its lease is live and it has
	// not been quiet for two leases).
	Counts bool
}

// ClockVoices returns the agents' reports the log clock is voted from,
// sorted by agent id; none below level 5.
func (v *View) ClockVoices() ([]ClockVoice, error) {
	val, ok, err := v.get(keyClockVoices)
	if err != nil || !ok {
		return nil, err
	}
	clock, err := v.LogClock()
	if err != nil {
		return nil, err
	}
	vs, err := decodeClockVoices(val, nil)
	if err != nil {
		return nil, err
	}
	out := make([]ClockVoice, len(vs))
	for i := range vs {
		out[i] = ClockVoice{AgentID: vs[i].AgentID, Report: vs[i].report(), Counts: vs[i].counts(clock)}
	}
	return out, nil
}
