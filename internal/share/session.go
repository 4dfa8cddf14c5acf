package share

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
)

// DefaultMaxSessions bounds the share sessions of one agent (Kafka's
// group.share.max.share.sessions is 2000 per broker).
const DefaultMaxSessions = 2000

// MaxSessionPartitions bounds the partitions of one share session.
const MaxSessionPartitions = 10000

// sessionKey names a share session: one per (group, member) on an
// agent; a member fetching from two agents has one on each.
type sessionKey struct {
	group, member string
}

// session is a share session: the partitions the member fetches from
// this agent, its epoch and the connection that opened it.
type session struct {
	epoch int32
	conn  uint64
	// parts is in the order the member added them; fresh marks those
	// not yet in a response (Kafka answers each new partition once,
	// even empty).
	parts []meta.PartitionRef
	fresh map[meta.PartitionRef]bool
}

// sessions holds an agent's share sessions.
type sessions struct {
	max int
	mu  struct {
		sync.Mutex
		m map[sessionKey]*session
	}
}

func newSessions(max int) *sessions {
	s := &sessions{max: max}
	s.mu.m = make(map[sessionKey]*session)
	return s
}

// open replaces k's session by a new one at epoch 1 (the epoch the
// client sends next) over parts. SHARE_SESSION_LIMIT_REACHED when the
// agent holds max sessions.
func (s *sessions) open(k sessionKey, conn uint64, parts []meta.PartitionRef) (session, *kerr.Error) {
	if len(parts) > MaxSessionPartitions {
		return session{}, kerr.InvalidRequest
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.m, k)
	if len(s.mu.m) >= s.max {
		return session{}, kerr.ShareSessionLimitReached
	}
	ss := &session{epoch: 1, conn: conn, fresh: make(map[meta.PartitionRef]bool)}
	for _, p := range parts {
		if _, dup := ss.fresh[p]; !dup {
			ss.parts = append(ss.parts, p)
			ss.fresh[p] = true
		}
	}
	s.mu.m[k] = ss
	return ss.snapshot(), nil
}

// update checks epoch against k's session, adds and forgets
// partitions, and moves the session to the next epoch.
func (s *sessions) update(k sessionKey, epoch int32, add, forget []meta.PartitionRef) (session, *kerr.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.mu.m[k]
	switch {
	case ss == nil:
		return session{}, kerr.ShareSessionNotFound
	case epoch != ss.epoch:
		return session{}, kerr.InvalidShareSessionEpoch
	}
	for _, p := range add {
		if _, ok := ss.fresh[p]; !ok {
			if len(ss.parts) >= MaxSessionPartitions {
				return session{}, kerr.InvalidRequest
			}
			ss.parts = append(ss.parts, p)
			ss.fresh[p] = true
		}
	}
	for _, p := range forget {
		if _, ok := ss.fresh[p]; ok {
			delete(ss.fresh, p)
			for i, q := range ss.parts {
				if q == p {
					ss.parts = append(ss.parts[:i], ss.parts[i+1:]...)
					break
				}
			}
		}
	}
	ss.epoch = nextEpoch(ss.epoch)
	return ss.snapshot(), nil
}

// check checks epoch against k's session and moves it to the next
// epoch (ShareAcknowledge).
func (s *sessions) check(k sessionKey, epoch int32) (session, *kerr.Error) {
	return s.update(k, epoch, nil, nil)
}

// answered marks parts as having been in a response.
func (s *sessions) answered(k sessionKey, parts []meta.PartitionRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.mu.m[k]; ss != nil {
		for _, p := range parts {
			if _, ok := ss.fresh[p]; ok {
				ss.fresh[p] = false
			}
		}
	}
}

// close removes k's session and returns it; SHARE_SESSION_NOT_FOUND
// when there is none.
func (s *sessions) close(k sessionKey) (session, *kerr.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.mu.m[k]
	if ss == nil {
		return session{}, kerr.ShareSessionNotFound
	}
	delete(s.mu.m, k)
	return ss.snapshot(), nil
}

// closeConn removes the sessions opened on conn, sorted by key.
func (s *sessions) closeConn(conn uint64) map[sessionKey]session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[sessionKey]session)
	for k, ss := range s.mu.m {
		if ss.conn == conn {
			out[k] = ss.snapshot()
			delete(s.mu.m, k)
		}
	}
	return out
}

func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.m)
}

// snapshot copies what a request reads, so it can drop the lock.
func (ss *session) snapshot() session {
	c := session{epoch: ss.epoch, conn: ss.conn, parts: append([]meta.PartitionRef(nil), ss.parts...), fresh: make(map[meta.PartitionRef]bool, len(ss.fresh))}
	for p, f := range ss.fresh {
		c.fresh[p] = f
	}
	return c
}

// nextEpoch follows Kafka's ShareRequestMetadata.nextEpoch: after
// MaxInt32 comes 1, never 0 (open) or -1 (close).
func nextEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}
