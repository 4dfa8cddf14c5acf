package kafka

import (
	"context"
	"slices"
	"strings"

	"github.com/strandkafka/strand/internal/meta"
)

// Feature levels (KIP-584) as clients see them: ApiVersions reports them,
// UpdateFeatures changes them, and ConsumerGroupHeartbeat and
// ConsumerGroupDescribe follow group.version. The levels live in the
// shared log (meta.FinalizeFeatures); a log from builds before feature
// levels holds none, and then an agent reports what those builds
// reported: transaction.version from --transaction-version, group.version
// 1 (KIP-848 served), strand.metadata.version 1.

// Feature levels this package answers for, beyond meta's.
const (
	// finalizedFeaturesEpoch is the epoch reported while the log holds
	// no finalized level, as builds before levels reported: any
	// non-negative number (-1 tells clients there are no finalized
	// features). The first FinalizeFeatures sits after at least one
	// registration, so its epoch (its position + 1) is above it; on a
	// new log it is the first entry and no agent served before it.
	finalizedFeaturesEpoch = 1
	// defaultGroupVersion is group.version on a log that finalized
	// none: KIP-848 was served before levels existed.
	defaultGroupVersion = 1
)

// featureSource is what a MetaDB that caches its finalized features
// offers (*replica.Replica does): ApiVersions and every consumer group
// heartbeat read them, and a View per request would cost a Pebble
// snapshot each.
type featureSource interface {
	Features() meta.FinalizedFeatures
}

// FeatureProber asks an agent which feature levels its build supports,
// for UpdateFeatures to check a live agent whose registration in the log
// carries no ranges (one registered at strand.metadata.version 1, or a
// build before levels). The agent's wiring answers with ApiVersions'
// SupportedFeatures; nil leaves such agents unchecked, so UpdateFeatures
// refuses while one is live.
type FeatureProber interface {
	SupportedFeatures(ctx context.Context, host string, port int32) ([]meta.FeatureRange, error)
}

// clusterFeatures is the finalized levels as this agent reports them,
// with the defaults above for what the log does not hold.
type clusterFeatures struct {
	log meta.FinalizedFeatures
	// levels is sorted by name; level 0 included.
	levels []meta.FeatureLevel
	epoch  int64
}

// level returns the reported level of name, 0 for one not finalized.
func (c clusterFeatures) level(name string) int16 {
	for _, l := range c.levels {
		if l.Name == name {
			return l.Level
		}
	}
	return 0
}

// features reads the finalized features: from Meta's cache when it has
// one, else from a View; with no Meta (a server in a test), a log that
// finalized none.
func (d *Deps) features() (clusterFeatures, error) {
	var f meta.FinalizedFeatures
	switch m := d.Meta.(type) {
	case nil:
	case featureSource:
		f = m.Features()
	default:
		v := m.View()
		var err error
		f, err = v.Features()
		v.Close()
		if err != nil {
			return clusterFeatures{}, err
		}
	}
	return d.reported(f), nil
}

// reported fills in what f does not hold.
func (d *Deps) reported(f meta.FinalizedFeatures) clusterFeatures {
	c := clusterFeatures{log: f, levels: slices.Clone(f.Levels), epoch: f.Epoch}
	if c.epoch == 0 {
		c.epoch = finalizedFeaturesEpoch
	}
	add := func(name string, level int16) {
		if _, ok := f.Level(name); !ok {
			c.levels = append(c.levels, meta.FeatureLevel{Name: name, Level: level})
		}
	}
	add(meta.FeatureMetadata, meta.MetadataLevel1)
	add(meta.FeatureTransaction, d.transactionVersion())
	add(meta.FeatureGroup, defaultGroupVersion)
	slices.SortFunc(c.levels, func(a, b meta.FeatureLevel) int { return strings.Compare(a.Name, b.Name) })
	return c
}

// groupProtocolEnabled reports whether group.version serves KIP-848's
// consumer protocol, as Kafka's isConsumerGroupProtocolEnabled does. An
// unreadable copy answers yes: its own handlers report that fault.
func (d *Deps) groupProtocolEnabled() bool {
	f, err := d.features()
	return err != nil || f.level(meta.FeatureGroup) >= 1
}
