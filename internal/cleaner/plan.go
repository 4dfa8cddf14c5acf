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
// log clock now (ms).
func PlanOf(entries iter.Seq[meta.IndexEntry], logStart, lso int64, cfg topicconfig.Config, now int64) Plan {
	p := Plan{LogStart: logStart, FirstDirty: -1}
	activeBase := int64(math.MaxInt64)
	var dirty []meta.IndexEntry // data entries from FirstDirty, newest excluded later
	end := logStart
	for e := range entries {
		end = e.BaseOffset + int64(e.Records)
		if e.Control {
			continue
		}
		activeBase = e.BaseOffset
		if p.FirstDirty < 0 && !Cleaned(e.ObjectKey) {
			p.FirstDirty = e.BaseOffset
		}
		if p.FirstDirty < 0 {
			p.CleanBytes += e.Length
			continue
		}
		dirty = append(dirty, e)
	}
	if p.FirstDirty < 0 {
		p.FirstDirty = end
	}
	p.FirstUncleanable = min(lso, activeBase)
	if cfg.MinCompactionLagMs > 0 {
		for _, e := range dirty {
			if e.MaxTimestamp > now-cfg.MinCompactionLagMs {
				p.FirstUncleanable = min(p.FirstUncleanable, e.BaseOffset)
				break
			}
		}
	}
	p.FirstUncleanable = max(p.FirstUncleanable, p.FirstDirty)
	firstTs := int64(-1)
	for _, e := range dirty {
		if e.BaseOffset+int64(e.Records) > p.FirstUncleanable {
			break
		}
		if firstTs < 0 {
			firstTs = e.FirstTimestamp
		}
		p.DirtyBytes += e.Length
	}
	if total := p.CleanBytes + p.DirtyBytes; total > 0 {
		p.Ratio = float64(p.DirtyBytes) / float64(total)
	}
	if cfg.MaxCompactionLagMs < math.MaxInt64 && firstTs >= 0 {
		p.MaxLagDue = firstTs < now-cfg.MaxCompactionLagMs
	}
	p.Due = p.DirtyBytes > 0 && (p.Ratio > cfg.MinCleanableDirtyRatio || p.MaxLagDue)
	return p
}
