package replica

import (
	"github.com/cockroachdb/pebble/v2"

	"github.com/strandkafka/strand/internal/meta"
)

// Feature levels: the replica encodes every proposal at the metadata
// level its copy has finalized (meta.EncodeCommandAt), so it writes only
// what every agent the level admits reads. The levels are read from
// Pebble when the copy opens and again after an apply batch that changed
// them, and kept here, since every proposal needs them.

// Features returns the finalized features of this copy, as of its last
// apply batch.
func (r *Replica) Features() meta.FinalizedFeatures {
	if f := r.features.Load(); f != nil {
		return *f
	}
	return meta.FinalizedFeatures{}
}

// loadFeatures reads the finalized features from db into the cache.
func (r *Replica) loadFeatures(db *pebble.DB) error {
	f, err := meta.ReadFeatures(pebbleReader{db})
	if err != nil {
		return err
	}
	r.features.Store(&f)
	return nil
}
