package meta

// Feature levels (KIP-584): how agents of different builds share one log.
//
// A command version a build cannot decode halts that build (PoisonError),
// so a build may write a new version only once no agent that would halt
// on it is left. The finalized level of strand.metadata.version, held in
// the log, says which versions every agent may write: the command table
// gives each version the level from which this build writes it
// (writtenFrom), and EncodeCommandAt picks the highest version the level
// allows. Levels only ever go up, and only when every live agent
// supports the new one, so every live agent reads whatever the level lets
// any other write.
//
//	level 1  what builds before feature levels wrote (frozenWrites in the
//	         table test pins it); a log with no finalized level is at 1
//	level 2  FinalizeFeatures (levels in the log) and AgentHeartbeat v3
//	         (each agent's supported ranges in the agent table)
//	level 3  the data lifecycle: retention, object garbage collection
//	         and storage accounting (issue "Data lifecycle");
//	         ReassignPartitions (replica lists, replicas.go);
//	         AlterBrokerConfigs (dynamic broker configs, brokerconfig.go)
//	level 4  compaction's index swaps, the security records,
//	         AgentHeartbeat v4
//	level 5  no new command versions: apply votes the log clock among
//	         the live agents (logclock.go), and the janitor waits for
//	         every live agent to apply past an object's death (gc.go)
//	level 6  the schema registry's records (schemas.go)
//	level 7  the SQL catalog's records (sql.go), and RELATION ACLs
//	level 8  the connectors' records (connect.go), and CONNECTOR ACLs
//	level 9  share groups: membership and group configs (share_group.go),
//	         and the share partitions' records (share_state.go)
//
// Kafka's own features live here too: transaction.version and
// group.version are finalized through the same command, at level 2 and up
// (a record needs FinalizeFeatures). Apply checks what the log can tell:
// every live agent whose heartbeat carries its ranges (v3) supports each
// new level. An agent registered at level 1 carries none; the proposer
// asks it (package kafka: UpdateFeatures) before raising a level.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Feature names.
const (
	// FeatureMetadata is Strand's own: which command versions agents
	// write (see the level table above).
	FeatureMetadata = "strand.metadata.version"
	// FeatureTransaction is Kafka's transaction.version: 2 tells clients
	// to use KIP-890 part 2.
	FeatureTransaction = "transaction.version"
	// FeatureGroup is Kafka's group.version: 1 serves the consumer group
	// protocol of KIP-848.
	FeatureGroup = "group.version"
)

// Levels of FeatureMetadata.
const (
	// MetadataLevel1 is what builds before feature levels wrote: every
	// command at the version those builds wrote. A log that finalized no
	// level is at level 1, so such a log keeps its older agents.
	MetadataLevel1 int16 = 1
	// MetadataLevel2 adds FinalizeFeatures and AgentHeartbeat v3.
	MetadataLevel2 int16 = 2
	// MetadataLevel3 adds the data lifecycle's commands. An older log
	// keeps every record until an operator raises it (strand features
	// upgrade).
	MetadataLevel3 int16 = 3
	// MetadataLevel4 adds compaction's index swaps, the security
	// records (SCRAM credentials, ACLs, client quotas) and
	// AgentHeartbeat v4 (the agent's listeners).
	MetadataLevel4 int16 = 4
	// MetadataLevel5 votes the log clock among the live agents
	// (logclock.go) and waits for them before deleting dead objects.
	MetadataLevel5 int16 = 5
	// MetadataLevel6 adds the schema registry's records.
	MetadataLevel6 int16 = 6
	// MetadataLevel7 adds the SQL catalog's records (sources, views,
	// sinks) and ACLs on them (acl.ResourceTypeRelation).
	MetadataLevel7 int16 = 7
	// MetadataLevel8 adds the connectors' records (connect.go) and ACLs
	// on them (acl.ResourceTypeConnector).
	MetadataLevel8 int16 = 8
	// MaxMetadataLevel is the highest level this build writes: a new
	// cluster starts there.
	MaxMetadataLevel = LevelShareGroups
)

// Limits on features in a command. Like apply's other limits they are
// part of what apply means.
const (
	maxFeatures         = 64
	maxFeatureNameBytes = 255
)

// prefixFeatures keys the one record of finalized features.
const prefixFeatures byte = 0x16

var keyFeatures = []byte{prefixFeatures}

// FeatureRange is a closed range of levels of one feature.
type FeatureRange struct {
	Name     string
	Min, Max int16
}

// Contains reports whether level is in the range.
func (r FeatureRange) Contains(level int16) bool { return r.Min <= level && level <= r.Max }

// String formats the range as Kafka's VersionRange does: "1-2", or "1".
func (r FeatureRange) String() string {
	if r.Min == r.Max {
		return fmt.Sprint(r.Min)
	}
	return fmt.Sprintf("%d-%d", r.Min, r.Max)
}

// supportedFeatures is this build's ranges, sorted by name.
var supportedFeatures = []FeatureRange{
	{Name: FeatureGroup, Min: 0, Max: 1},
	{Name: FeatureMetadata, Min: MetadataLevel1, Max: MaxMetadataLevel},
	{Name: FeatureTransaction, Min: 0, Max: 2},
}

// SupportedFeatures returns the levels this build supports, sorted by
// name. The caller owns the slice.
func SupportedFeatures() []FeatureRange { return slices.Clone(supportedFeatures) }

// SupportedRange returns this build's range of feature name, false for a
// feature it does not know.
func SupportedRange(name string) (FeatureRange, bool) { return findRange(supportedFeatures, name) }

func findRange(rs []FeatureRange, name string) (FeatureRange, bool) {
	i, ok := slices.BinarySearchFunc(rs, name, func(r FeatureRange, n string) int { return strings.Compare(r.Name, n) })
	if !ok {
		return FeatureRange{Name: name}, false
	}
	return rs[i], true
}

// FeatureLevel is one finalized level.
type FeatureLevel struct {
	Name  string
	Level int16
}

// FinalizedFeatures is what the log finalized.
type FinalizedFeatures struct {
	// Levels is sorted by name. A level finalized at 0 stays listed: 0
	// is a level (Kafka's "disabled"), not "never finalized".
	Levels []FeatureLevel
	// Epoch is the log position after the FinalizeFeatures that last
	// changed Levels (KIP-584's finalized features epoch), so it only
	// grows; 0 when the log finalized nothing (a log of builds before
	// feature levels, or a new one).
	Epoch int64
}

// Level returns the finalized level of name, false if none is.
func (f FinalizedFeatures) Level(name string) (int16, bool) {
	i, ok := slices.BinarySearchFunc(f.Levels, name, func(l FeatureLevel, n string) int { return strings.Compare(l.Name, n) })
	if !ok {
		return 0, false
	}
	return f.Levels[i].Level, true
}

// MetadataLevel is the finalized strand.metadata.version: level 1 when
// none is finalized, as builds before levels wrote.
func (f FinalizedFeatures) MetadataLevel() int16 {
	if l, ok := f.Level(FeatureMetadata); ok {
		return l
	}
	return MetadataLevel1
}

// CheckSupported reports the first finalized level this build does not
// support. An agent must not serve such a log: it might not read what
// the others write. A feature this build does not know is supported at
// level 0 only, as Kafka treats a feature a broker does not advertise.
func (f FinalizedFeatures) CheckSupported() error {
	for _, l := range f.Levels {
		if r, _ := SupportedRange(l.Name); !r.Contains(l.Level) {
			return fmt.Errorf("%w: %s is finalized at %d, this build supports %s", ErrUnsupportedFeature, l.Name, l.Level, describeSupport(l.Name))
		}
	}
	return nil
}

// ErrUnsupportedFeature: the log finalized a feature level this build
// does not support. A copy halts before such a FinalizeFeatures, as
// before a command version it does not know.
var ErrUnsupportedFeature = fmt.Errorf("%w: a feature level this build does not support", ErrUnknownCommand)

func describeSupport(name string) string {
	r, _ := SupportedRange(name)
	if r.Max == 0 {
		return "none of its levels"
	}
	return "levels " + r.String()
}

// FinalizeFeatures finalizes feature levels: what UpdateFeatures asks
// for, after the proposer checked that every live agent supports each
// level (including agents whose heartbeats carry no ranges, which apply
// cannot check), and what the first agent of a new cluster writes.
// Result: INVALID_REQUEST for no features, more than 64, an empty or
// oversized name or a negative level; INVALID_UPDATE_VERSION, changing
// nothing, when strand.metadata.version would go below 1 or down at all
// (the log may hold what only newer builds read), when another feature
// is set while strand.metadata.version stays below 2, or when a live
// agent whose heartbeat carries its ranges does not support a level.
//
// A copy of a build that does not support every level it finalizes
// halts before it (DecodeCommand: ErrUnsupportedFeature).
type FinalizeFeatures struct {
	// Features are the levels to finalize, sorted by name, each name
	// at most once (the decoder accepts no other order). Features not
	// named keep their levels.
	Features []FeatureLevel
	// Bootstrap applies the levels only to a new log: one that
	// finalized nothing and where no agent ever registered (no cluster
	// id). Elsewhere it changes nothing. Every agent starting on an
	// empty log proposes it before registering, so a new cluster starts
	// at the levels of whichever agent came first, and a log that
	// already served agents of older builds stays at level 1.
	Bootstrap bool
}

func (FinalizeFeatures) Type() CommandType { return TypeFinalizeFeatures }
func (FinalizeFeatures) version() uint16   { return 1 }

func (c FinalizeFeatures) appendPayload(b []byte) []byte {
	b = appendBool(b, c.Bootstrap)
	return appendFeatureLevels(b, c.Features)
}

// raisesTo is the strand.metadata.version c finalizes: EncodeCommandAt
// writes c at that level, since its proposer checked that every live
// agent reads it.
func (c FinalizeFeatures) raisesTo() int16 {
	for _, f := range c.Features {
		if f.Name == FeatureMetadata {
			return f.Level
		}
	}
	return 0
}

// beyondBuild refuses a level this build does not support (see
// CheckSupported).
func (c FinalizeFeatures) beyondBuild() error {
	return FinalizedFeatures{Levels: c.Features}.CheckSupported()
}

func decodeFinalizeFeaturesV1(p []byte) (FinalizeFeatures, error) {
	r := &reader{b: p}
	var c FinalizeFeatures
	c.Bootstrap = r.bool()
	c.Features = r.featureLevels()
	return c, r.done()
}

func appendFeatureLevels(b []byte, ls []FeatureLevel) []byte {
	b = appendUvarint(b, uint64(len(ls)))
	for _, l := range ls {
		b = appendString(b, l.Name)
		b = appendVarint(b, int64(l.Level))
	}
	return b
}

// featureLevels decodes what appendFeatureLevels wrote: names strictly
// increasing. An empty list decodes as nil.
func (r *reader) featureLevels() []FeatureLevel {
	n := r.count(2) // an empty name and a one-byte level
	if n == 0 {
		return nil
	}
	ls := make([]FeatureLevel, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		l := FeatureLevel{Name: r.string(), Level: r.int16()}
		if i > 0 && l.Name <= ls[i-1].Name {
			r.fail(errUnsorted)
		}
		ls = append(ls, l)
	}
	return ls
}

func appendFeatureRanges(b []byte, rs []FeatureRange) []byte {
	b = appendUvarint(b, uint64(len(rs)))
	for _, f := range rs {
		b = appendString(b, f.Name)
		b = appendVarint(b, int64(f.Min))
		b = appendVarint(b, int64(f.Max))
	}
	return b
}

// featureRanges decodes what appendFeatureRanges wrote: names strictly
// increasing. An empty list decodes as nil.
func (r *reader) featureRanges() []FeatureRange {
	n := r.count(3)
	if n == 0 {
		return nil
	}
	rs := make([]FeatureRange, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		f := FeatureRange{Name: r.string(), Min: r.int16(), Max: r.int16()}
		if i > 0 && f.Name <= rs[i-1].Name {
			r.fail(errUnsorted)
		}
		rs = append(rs, f)
	}
	return rs
}

func validFeatureName(name string) bool { return name != "" && len(name) <= maxFeatureNameBytes }

func validFinalize(c *FinalizeFeatures) (Result, bool) {
	if len(c.Features) == 0 || len(c.Features) > maxFeatures {
		return failed(kerr.InvalidRequest, "%d features, want 1 to %d", len(c.Features), maxFeatures), false
	}
	for _, f := range c.Features {
		switch {
		case !validFeatureName(f.Name):
			return failed(kerr.InvalidRequest, "feature name of %d bytes, want 1 to %d", len(f.Name), maxFeatureNameBytes), false
		case f.Level < 0:
			return failed(kerr.InvalidRequest, "%s: level %d is negative", f.Name, f.Level), false
		}
	}
	return Result{}, true
}

// invalidUpdate is Kafka's INVALID_UPDATE_VERSION with its controller's
// wording, so tools print what they print for Kafka.
func invalidUpdate(name string, level int16, format string, args ...any) Result {
	return failed(kerr.InvalidUpdateVersion, "Invalid update version %d for feature %s. %s", level, name, fmt.Sprintf(format, args...))
}

func (a *Applier) finalizeFeatures(c FinalizeFeatures) (Result, error) {
	if res, ok := validFinalize(&c); !ok {
		return res, nil
	}
	cur, err := ReadFeatures(a.b)
	if err != nil {
		return Result{}, err
	}
	if c.Bootstrap {
		_, registered, err := a.get(keyClusterID)
		if err != nil {
			return Result{}, err
		}
		if cur.Epoch != 0 || registered {
			return Result{Message: "not a new log: its levels stay"}, nil
		}
	}
	next := mergeLevels(cur.Levels, c.Features)
	nextMeta := FinalizedFeatures{Levels: next}.MetadataLevel()
	for _, f := range c.Features {
		switch {
		case f.Name == FeatureMetadata && f.Level < MetadataLevel1:
			return invalidUpdate(f.Name, f.Level, "The lowest level is %d.", MetadataLevel1), nil
		case f.Name == FeatureMetadata && f.Level < cur.MetadataLevel():
			return invalidUpdate(f.Name, f.Level, "Refusing to downgrade from %d: the log may hold commands that builds supporting only %d cannot read.",
				cur.MetadataLevel(), f.Level), nil
		case f.Name != FeatureMetadata && nextMeta < MetadataLevel2:
			return invalidUpdate(f.Name, f.Level, "%s could not be set to %d because it depends on %s level %d.",
				f.Name, f.Level, FeatureMetadata, MetadataLevel2), nil
		}
	}
	if err := a.loadClock(); err != nil {
		return Result{}, err
	}
	agents, err := a.liveAgents()
	if err != nil {
		return Result{}, err
	}
	for _, f := range c.Features {
		if res, ok := agentsSupport(agents, f); !ok {
			return res, nil
		}
	}
	if err := a.buildPartitionStorage(cur.MetadataLevel(), nextMeta); err != nil {
		return Result{}, err
	}
	if err := a.startGC(cur.MetadataLevel(), nextMeta, c.Bootstrap); err != nil {
		return Result{}, err
	}
	rec := FinalizedFeatures{Levels: next, Epoch: int64(a.pos) + 1}
	a.featuresChanged = true
	return Result{}, a.b.Set(keyFeatures, rec.encode())
}

// agentsSupport checks f against every agent whose heartbeat carried its
// ranges, with the wording of Kafka's controller.
func agentsSupport(agents []AgentInfo, f FeatureLevel) (Result, bool) {
	for _, ag := range agents {
		if len(ag.Features) == 0 {
			continue // registered at level 1: the proposer asked it
		}
		r, _ := findRange(ag.Features, f.Name) // one it does not know: 0 only
		if r.Contains(f.Level) {
			continue
		}
		if r.Max == 0 {
			return invalidUpdate(f.Name, f.Level, "Agent %d does not support this feature.", ag.NodeID), false
		}
		return invalidUpdate(f.Name, f.Level, "Agent %d only supports versions %s", ag.NodeID, r), false
	}
	return Result{}, true
}

// liveAgents is LiveAgents read through the batch, by the log clock.
func (a *Applier) liveAgents() ([]AgentInfo, error) {
	it, err := a.b.NewIter([]byte{prefixAgent}, []byte{prefixAgent + 1})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var live []AgentInfo
	for ok := it.First(); ok; ok = it.Next() {
		ag, err := decodeAgentInfo(it.Key(), it.Value())
		if err != nil {
			return nil, err
		}
		if ag.Expires > a.clock {
			live = append(live, ag)
		}
	}
	return live, it.Error()
}

// mergeLevels returns cur with the levels of set replaced or added,
// sorted by name. Both are sorted.
func mergeLevels(cur, set []FeatureLevel) []FeatureLevel {
	out := slices.Clone(cur)
	for _, s := range set {
		i, found := slices.BinarySearchFunc(out, s.Name, func(l FeatureLevel, n string) int { return strings.Compare(l.Name, n) })
		if found {
			out[i] = s
		} else {
			out = slices.Insert(out, i, s)
		}
	}
	return out
}

// The 0x16 record: epoch, then the levels sorted by name.
func (f FinalizedFeatures) encode() []byte {
	b := []byte{recordV1}
	b = appendUvarint(b, uint64(f.Epoch))
	return appendFeatureLevels(b, f.Levels)
}

func decodeFinalizedFeatures(v []byte) (FinalizedFeatures, error) {
	r := recordReader(v)
	var f FinalizedFeatures
	epoch := r.uvarint()
	f.Levels = r.featureLevels()
	if epoch == 0 || epoch > 1<<63-1 || len(f.Levels) == 0 {
		r.fail(errRange) // a record exists only once something was finalized
	}
	f.Epoch = int64(epoch)
	if err := r.done(); err != nil {
		return FinalizedFeatures{}, corrupt("finalized features", err)
	}
	return f, nil
}

// ReadFeatures reads the finalized features from a store: the zero value
// (level 1, epoch 0) when none were ever finalized. The driver reads it
// when it opens a copy, and after a batch whose Applier reports
// FeaturesChanged.
func ReadFeatures(r Reader) (FinalizedFeatures, error) {
	v, ok, err := r.Get(keyFeatures)
	if err != nil || !ok {
		return FinalizedFeatures{}, err
	}
	return decodeFinalizedFeatures(v)
}

// Features returns the finalized features.
func (v *View) Features() (FinalizedFeatures, error) { return ReadFeatures(v.r) }

// FeaturesChanged reports whether a FinalizeFeatures changed the
// finalized levels in the batch since Reset: the driver then reads them
// again (ReadFeatures) to encode what it proposes next.
func (a *Applier) FeaturesChanged() bool { return a.featuresChanged }
