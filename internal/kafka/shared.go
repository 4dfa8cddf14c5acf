package kafka

import (
	"sync/atomic"
	"time"
)

// sharedState is what the handlers of one Server share across
// connections. New makes it from the Config.
type sharedState struct {
	// partitionLists shares Metadata's partition entries.
	partitionLists *partitionLists
	// responses is the response memory budget (respbudget.go).
	responses *respBudget
	// metadataPacer paces large Metadata answers (metadata_rate.go).
	metadataPacer *bytePacer
	// fetchPacer paces Fetch records to Deps.MaxFetchBytesPerSec; nil
	// when unlimited.
	fetchRate *bytePacer
	// fetchYield paces Fetch records while other requests wait for a
	// CPU (fetch_yield.go).
	fetchYield *fetchYield
	// tail throttles Produce while tail consumers fall behind for want
	// of CPU (fetch_tail.go).
	tail *tailGuard
	// partitions counts the partitions being created (partition_limits.go).
	partitions partitionGate
	// acls holds the authorizer built from this agent's copy of the
	// ACLs (authz.go).
	acls aclCache
	// quotas enforces client quotas (quotas.go).
	quotas *clientQuotas
	// allTopicsBytes is what the last Metadata answer listing every
	// topic held of the budget; 0 before the first.
	allTopicsBytes atomic.Int64
	// sessions holds the fetch sessions (fetch_session.go).
	sessions *fetchSessionCache
	// zones remembers clients' client.rack (zones.go).
	zones *zoneMemo
}

func newSharedState(cfg Config) *sharedState {
	// Room for twice the partitions the cluster may hold (about 110
	// bytes each), so deleted topics do not make the table thrash.
	maxEntries := max(2*cfg.Deps.maxPartitions(), maxPartitionsPerTopic)
	s := &sharedState{
		partitionLists: newPartitionLists(maxEntries),
		responses:      newRespBudget(cfg.MaxHeldResponseBytes),
		metadataPacer:  newBytePacer(metadataBytesPerSec, metadataBurstBytes),
		fetchYield:     newFetchYield(time.Now, runtimeSchedWaits()),
		tail:           newTailGuard(time.Now),
		quotas:         newClientQuotas(cfg.Deps.Meta, cfg.Quota, cfg.Deps.now),
		zones:          newZoneMemo(),
	}
	if cfg.Deps.NoTailPace {
		s.tail = nil
	}
	if cfg.FetchSessionSlots > 0 {
		s.sessions = newFetchSessionCache(cfg.Deps.now, cfg.FetchSessionSlots, fetchSessionPartitions)
	}
	if r := cfg.Deps.MaxFetchBytesPerSec; r > 0 {
		// A burst of a quarter second: one large fetch goes at once.
		s.fetchRate = newBytePacer(float64(r), float64(max(r/4, maxFetchResponseBytes)))
	}
	return s
}

func (s *sharedState) fetchPacer() *bytePacer {
	if s == nil {
		return nil
	}
	return s.fetchRate
}

// lastAllTopicsBytes is what a Metadata answer listing every topic
// reserves before it is built. Before the first it is an eighth of the
// budget, so a few first answers are built at a time. Not the whole
// budget: that waited for every other response to be written, behind a
// long-polling Fetch holding a little for its MaxWaitMillis, and for
// good behind an answer pipelined after it on the same connection,
// which holds budget and is written only after it.
func (s *sharedState) lastAllTopicsBytes() int64 {
	if s == nil {
		return 0
	}
	if n := s.allTopicsBytes.Load(); n > 0 {
		return n
	}
	return s.responses.capBytes / firstAllTopicsShare
}

// firstAllTopicsShare: the first answers listing every topic reserve
// 1/firstAllTopicsShare of the response budget each.
const firstAllTopicsShare = 8

// allTopicsHeld is what the last answer listing every topic held, 0
// before the first.
func (s *sharedState) allTopicsHeld() int64 {
	if s == nil {
		return 0
	}
	return s.allTopicsBytes.Load()
}

func (s *sharedState) noteAllTopicsBytes(n int64) {
	if s != nil {
		s.allTopicsBytes.Store(n)
	}
}

// noteRequest counts a request the server read, of frameBytes, for
// fetchYield.
func (s *sharedState) noteRequest(key int16, frameBytes int64) {
	if s == nil || key == fetchKey {
		return
	}
	s.fetchYield.others.Add(1)
	if key == produceKey {
		s.fetchYield.produced.Add(frameBytes)
	}
}
