package cleaner

import (
	"iter"
	"math"
	"strings"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/segment"
	"github.com/strandkafka/strand/internal/topicconfig"
)

// CleanTag ends the writer part of the key of an object a cleaning round
// wrote. It ends in the object compactor's own tag ("~c", package
// compact), so the object compactor takes it for a compacted object and
// leaves it alone.
const CleanTag = "~k~c"

// Cleaned reports whether a data object key names a cleaning round's
// output.
func Cleaned(key string) bool {
	agent, _, _, err := segment.ParseObjectKey(key)
	return err == nil && strings.HasSuffix(agent, CleanTag)
}

// Plan is where a partition's clean and dirty sections lie and whether a
// round is due, as Kafka's LogCleanerManager.cleanableOffsets and
// grabFilthiestCompactedLog decide it.
//
// The cleaner checkpoint (Kafka's cleaner-offset-checkpoint file) is
// read off the index rather than kept: the clean section is the run of
// entries from the log start that point into objects a round wrote
// (Cleaned). A round cleans [log start, end) and rewrites all of it, so
// after a whole round the index is cleaned objects up to its end; after
// one cut short (a lost swap, a crash) the first entry it did not
// replace is where the next begins, which re-maps everything after it.
// Markers have no object and do not count.
//
// The first uncleanable offset is the lowest of: the last stable offset
// (an open transaction is never cleaned), the base of the partition's
// newest data entry (Kafka's active segment: here the newest flush; the
// issue asks that the newest data is never compacted, and Strand has no
// segment.ms roll to wait for), and the first dirty entry whose newest
// record is younger than min.compaction.lag.ms.
type Plan struct {
	LogStart         int64
	FirstDirty       int64
	FirstUncleanable int64
	// CleanBytes is the bytes of [LogStart, FirstDirty); DirtyBytes the
	// cleanable dirty bytes, [FirstDirty, FirstUncleanable).
	CleanBytes, DirtyBytes int64
	// Ratio is DirtyBytes over CleanBytes + DirtyBytes: Kafka's
	// cleanable ratio, compared with min.cleanable.dirty.ratio.
	Ratio float64
	// MaxLagDue: the oldest cleanable dirty batch is older than
	// max.compaction.lag.ms, which makes the round due whatever the
	// ratio.
	MaxLagDue bool
	// Due: a round would clean something and the ratio or the lag asks
	// for it.
	Due bool
}

// PlanOf plans a partition whose index entries from logStart on are
// entries, whose last stable offset is lso, with topic configs cfg, at
// log clock now (ms). It walks the entries once, holding none but the
// newest: a partition may have many.
//
// max.compaction.lag.ms also reaches the newest entry: Kafka rolls an
// active segment whose first record is older than the lag so it can be
// cleaned, and here such an entry is cleanable.
func PlanOf(entries iter.Seq[meta.IndexEntry], logStart, lso int64, cfg topicconfig.Config, now int64) Plan {
	p := Plan{LogStart: logStart, FirstDirty: -1}
	maxLag := cfg.MaxCompactionLagMs < math.MaxInt64
	// bound is the lowest of lso and the first dirty entry younger than
	// min.compaction.lag.ms: no dirty entry ending past it is cleanable.
	bound := lso
	firstTs := int64(-1)
	count := func(e *meta.IndexEntry) {
		if e.BaseOffset+int64(e.Records) > bound {
			return
		}
		if firstTs < 0 {
			firstTs = e.FirstTimestamp
		}
		p.DirtyBytes += e.Length
		p.FirstUncleanable = e.BaseOffset + int64(e.Records)
	}
	var newest meta.IndexEntry // the newest data entry; dirty ones are counted once a newer one shows
	newestDirty := false
	end := logStart
	for e := range entries {
		end = e.BaseOffset + int64(e.Records)
		if e.Control {
			continue
		}
		if p.FirstDirty < 0 && !Cleaned(e.ObjectKey) {
			p.FirstDirty = e.BaseOffset
			p.FirstUncleanable = e.BaseOffset
		}
		if p.FirstDirty < 0 {
			p.CleanBytes += e.Length
			newest = e
			continue
		}
		if newestDirty {
			count(&newest)
		}
		newest, newestDirty = e, true
		if cfg.MinCompactionLagMs > 0 && e.MaxTimestamp > now-cfg.MinCompactionLagMs {
			bound = min(bound, e.BaseOffset)
		}
	}
	if p.FirstDirty < 0 {
		p.FirstDirty, p.FirstUncleanable = end, end
	}
	if newestDirty && maxLag && newest.FirstTimestamp < now-cfg.MaxCompactionLagMs {
		count(&newest)
	}
	if total := p.CleanBytes + p.DirtyBytes; total > 0 {
		p.Ratio = float64(p.DirtyBytes) / float64(total)
	}
	if maxLag && firstTs >= 0 {
		p.MaxLagDue = firstTs < now-cfg.MaxCompactionLagMs
	}
	p.Due = p.DirtyBytes > 0 && (p.Ratio > cfg.MinCleanableDirtyRatio || p.MaxLagDue)
	return p
}
