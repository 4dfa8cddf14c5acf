package e2e

import (
	"strings"
	"testing"
)

// TestShareHistoryChecker feeds the chaos test's checker hand-made
// histories: each broken one must fail with the reason named, each
// sound one must pass with the counts given.
func TestShareHistoryChecker(t *testing.T) {
	const limit = 3
	recs := []shareRecord{{ID: "a", Partition: 0, Offset: 0}, {ID: "b", Partition: 1, Offset: 0}, {ID: "x", Partition: 0, Offset: 1, Poison: true}}
	acq := func(t int64, c, id string, dc int32) shareEvent {
		p, o := int32(0), int64(0)
		switch id {
		case "b":
			p = 1
		case "x":
			o = 1
		}
		return shareEvent{T: t, Ev: evAcquired, Consumer: c, ID: id, Partition: p, Offset: o, Delivery: dc, Deadline: t + 1000}
	}
	send := func(t int64, c, id, ack string) shareEvent {
		return shareEvent{T: t, Ev: evSent, Consumer: c, ID: id, Ack: ack}
	}
	ok := func(t int64, c, id string) shareEvent { return shareEvent{T: t, Ev: evAckOK, Consumer: c, ID: id} }
	refused := func(t int64, c, id string) shareEvent { return shareEvent{T: t, Ev: evAckErr, Consumer: c, ID: id} }
	kill := func(t int64, c string) shareEvent { return shareEvent{T: t, Ev: evKill, Consumer: c} }
	lost := func(t int64, p int32) shareEvent { return shareEvent{T: t, Ev: evLost, Partition: p} }
	// x released limit times, by whoever: archived.
	archivedX := []shareEvent{
		acq(1, "c1", "x", 1), send(2, "c1", "x", ackRelease), ok(3, "c1", "x"),
		acq(4, "c2", "x", 2), send(5, "c2", "x", ackRelease), ok(6, "c2", "x"),
		acq(7, "c1", "x", 3), send(8, "c1", "x", ackRelease), ok(9, "c1", "x"),
	}
	good := append([]shareEvent{
		acq(10, "c1", "a", 1), acq(10, "c1", "b", 1),
		send(20, "c1", "a", ackAccept), ok(25, "c1", "a"),
		send(30, "c1", "b", ackAccept), ok(35, "c1", "b"),
	}, archivedX...)

	tests := []struct {
		name    string
		events  []shareEvent
		wantErr string // "" for a sound history
		check   func(shareVerdict) bool
	}{
		{name: "sound", events: good, check: func(v shareVerdict) bool { return v.Accepted == 2 && v.Archived == 1 && v.Redelivered == 1 }},
		{
			name: "redelivered after a kill",
			events: append([]shareEvent{
				acq(10, "c1", "a", 1), acq(10, "c1", "b", 1), kill(15, "c1"),
				acq(16, "c2", "a", 2), acq(16, "c2", "b", 2),
				send(20, "c2", "a", ackAccept), ok(21, "c2", "a"), send(22, "c2", "b", ackAccept), ok(23, "c2", "b"),
			}, archivedX...),
			check: func(v shareVerdict) bool { return v.Accepted == 2 && v.Redelivered == 3 },
		},
		{
			name: "redelivered after the agent died",
			events: append([]shareEvent{
				acq(10, "c1", "a", 1), acq(10, "c1", "b", 1), lost(12, 0), acq(13, "c2", "a", 2),
				send(20, "c2", "a", ackAccept), ok(21, "c2", "a"),
				send(22, "c1", "a", ackAccept), refused(23, "c1", "a"),
				send(24, "c1", "b", ackAccept), ok(25, "c1", "b"),
			}, archivedX...),
			check: func(v shareVerdict) bool { return v.Accepted == 2 },
		},
		{
			name: "accept sent, consumer killed before the answer, never redelivered",
			events: append([]shareEvent{
				acq(10, "c1", "a", 1), acq(10, "c1", "b", 1), send(20, "c1", "a", ackAccept), kill(21, "c1"),
				acq(30, "c2", "b", 2), send(31, "c2", "b", ackAccept), ok(32, "c2", "b"),
			}, archivedX...),
			check: func(v shareVerdict) bool { return v.Accepted == 1 && v.AcceptedUnconfirmed == 1 },
		},
		{
			name: "two holders at once",
			events: append(good[:len(good):len(good)],
				acq(12, "c2", "a", 2)),
			wantErr: `"a" held by two consumers at once`,
		},
		{
			name: "held across the partition's agent death elsewhere",
			events: append([]shareEvent{
				// The agent of partition 1 died, not that of a's
				// partition 0: c1 still held a.
				acq(10, "c1", "a", 1), lost(12, 1), acq(13, "c2", "a", 2),
				send(20, "c2", "a", ackAccept), ok(21, "c2", "a"),
				acq(30, "c2", "b", 1), send(31, "c2", "b", ackAccept), ok(32, "c2", "b"),
			}, archivedX...),
			wantErr: `"a" held by two consumers at once`,
		},
		{
			name: "accepted twice",
			events: append(good[:len(good):len(good)],
				acq(40, "c2", "a", 2), send(41, "c2", "a", ackAccept), ok(42, "c2", "a")),
			wantErr: `"a" accepted 2 times`,
		},
		{
			name: "delivered again after the accept",
			events: append(good[:len(good):len(good)],
				acq(40, "c2", "a", 2), kill(41, "c2")),
			wantErr: `"a" delivered again after its accept was confirmed`,
		},
		{
			name:    "lost: never delivered",
			events:  good[6:],
			wantErr: `"a" (0/0) lost: never delivered`,
		},
		{
			name: "lost: released under the limit",
			events: append([]shareEvent{
				acq(10, "c1", "a", 1), send(11, "c1", "a", ackRelease), ok(12, "c1", "a"),
			}, good[3:]...),
			wantErr: `"a" (0/0) lost: delivered 1 times`,
		},
		{
			name:    "poison archived too early",
			events:  good[:len(good)-3],
			wantErr: `"x" (0/1) lost: delivered 2 times (limit 3)`,
		},
		{
			// A third delivery to a consumer killed before it logged it.
			name:   "archived with an unseen last delivery",
			events: append(good[:len(good)-3:len(good)-3], kill(100, "c9")),
			check:  func(v shareVerdict) bool { return v.Accepted == 2 && v.ArchivedUnseen == 1 },
		},
		{
			name:    "unseen delivery while the partition's agent stayed up",
			events:  append(good[:len(good)-3:len(good)-3], lost(100, 1)),
			wantErr: `"x" (0/1) lost: delivered 2 times (limit 3)`,
		},
		{
			name: "past the limit after a gap in delivery counts",
			events: append(good[:len(good)-3:len(good)-3],
				acq(50, "c2", "x", 4)),
			wantErr: `"x" delivered a 4. time`,
		},
		{
			name: "delivered past the limit",
			events: append(good[:len(good):len(good)],
				acq(50, "c2", "x", 4), send(51, "c2", "x", ackRelease), ok(52, "c2", "x")),
			wantErr: `"x" delivered a 4. time`,
		},
		{
			name:    "acquired after the kill",
			events:  append([]shareEvent{kill(1, "c1")}, good...),
			wantErr: "c1 acquired \"a\" after it was killed",
		},
		{
			name: "lock expiry ends the hold",
			events: append([]shareEvent{
				// c1's lock on a expired at 1010; c2 took it at 1500.
				acq(10, "c1", "a", 1), acq(1500, "c2", "a", 2),
				send(1600, "c2", "a", ackAccept), ok(1601, "c2", "a"),
				send(1700, "c1", "a", ackAccept), refused(1701, "c1", "a"),
				acq(10, "c3", "b", 1), send(20, "c3", "b", ackAccept), ok(21, "c3", "b"),
			}, archivedX...),
			check: func(v shareVerdict) bool { return v.Accepted == 2 },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := checkShareHistory(recs, tc.events, limit)
			if tc.wantErr == "" {
				if len(v.Errs) > 0 || !tc.check(v) {
					t.Fatalf("sound history: %v", v)
				}
				return
			}
			for _, e := range v.Errs {
				if strings.Contains(e, tc.wantErr) {
					return
				}
			}
			t.Fatalf("want an error containing %q, got %v", tc.wantErr, v)
		})
	}
}

// TestReadShareEvents: a torn last line (the consumer was killed
// mid-write) is dropped; a bad line before others is an error.
func TestReadShareEvents(t *testing.T) {
	evs, err := readShareEvents(strings.NewReader(`{"t":1,"ev":"acq","c":"c1","p":0,"o":0,"id":"a"}` + "\n" + `{"t":2,"ev":"se`))
	if err != nil || len(evs) != 1 || evs[0].ID != "a" {
		t.Fatalf("torn tail: %v %v", evs, err)
	}
	if _, err := readShareEvents(strings.NewReader("{bad\n" + `{"t":1,"ev":"acq"}` + "\n")); err == nil {
		t.Fatal("a bad line in the middle passed")
	}
}
