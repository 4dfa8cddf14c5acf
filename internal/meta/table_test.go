package meta

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// legacyEncoders encode the versions this build still decodes but no
// longer writes, so that every version a row decodes round-trips. A row
// that gains a version moves its old encoder here.
var legacyEncoders = map[CommandType]map[uint16]func(Command) []byte{
	TypeCommitObject: {1: func(c Command) []byte {
		// Version 2 appends the Transactional flag to every batch.
		co := c.(CommitObject)
		b := appendString(nil, co.ObjectKey)
		b = appendVarint(b, co.ObjectSize)
		b = appendUvarint(b, uint64(len(co.Batches)))
		for _, cb := range co.Batches {
			one := CommitObject{Batches: []CommitBatch{cb}}.appendPayload(nil)
			// Past the empty key, size and count of one: the batch,
			// then its flag.
			b = append(b, one[3:len(one)-1]...)
		}
		return b
	}},
	TypeAgentHeartbeat: {
		1: func(c Command) []byte { return heartbeatV1(c.(AgentHeartbeat)).appendPayload(nil) },
		// Version 2 is still written, at strand.metadata.version 1.
		2: func(c Command) []byte { return c.(AgentHeartbeat).appendPayloadAt(nil, 2) },
		// Version 3 is still written, at levels 2 and 3.
		3: func(c Command) []byte { return c.(AgentHeartbeat).appendPayloadAt(nil, 3) },
	},
	TypeEndTxn: {1: func(c Command) []byte {
		// Version 2 appends BumpEpoch.
		e := c.(EndTxn)
		b := appendTxnProducer(nil, e.TransactionalID, e.ProducerID, e.ProducerEpoch)
		b = appendBool(b, e.Commit)
		return appendVarint(b, e.Seq)
	}},
}

// TestCommandTable walks every row of the command table. A command this
// build knows must have a name, a fuzz seed (seedCommands), a canonical
// round trip at every version it decodes, the version it writes among
// them, and a scenario under testdata/ that applies it.
func TestCommandTable(t *testing.T) {
	seeds := map[CommandType][]Command{}
	for _, c := range seedCommands() {
		seeds[c.Type()] = append(seeds[c.Type()], c)
	}
	applied := scenarioCommandNames(t)
	names := map[string]CommandType{}
	rows := 0
	for i := range commandTable {
		typ := CommandType(i)
		s := specOf(typ)
		if s == nil {
			continue
		}
		rows++
		t.Run(s.name, func(t *testing.T) {
			if prev, dup := names[s.name]; dup || s.name == "" || typ.String() != s.name {
				t.Errorf("name %q (String %q, also type %d)", s.name, typ.String(), prev)
			}
			names[s.name] = typ
			if s.apply == nil || len(s.decoders) == 0 {
				t.Fatalf("no apply or no decoder")
			}
			if len(seeds[typ]) == 0 {
				t.Fatalf("no fuzz seed in seedCommands")
			}
			for _, c := range seeds[typ] {
				if s.decoder(c.version()) == nil {
					t.Errorf("writes version %d, which it does not decode", c.version())
				}
				for _, d := range s.decoders {
					var payload []byte
					if d.version == c.version() {
						payload = c.appendPayload(nil)
					} else if enc := legacyEncoders[typ][d.version]; enc != nil {
						payload = enc(c)
					} else {
						t.Fatalf("version %d: no encoder in legacyEncoders to round-trip it", d.version)
					}
					checkRoundTrip(t, RawCommand{Type: typ, Version: d.version, Payload: payload}, legacyEncoders[typ][d.version])
				}
				if got, err := DecodeCommand(EncodeCommand(c)); err != nil || !reflect.DeepEqual(got, c) {
					t.Errorf("round trip of %#v = %#v, %v", c, got, err)
				}
			}
			if !applied[s.name] {
				t.Errorf("no scenario under testdata/ applies %s", s.name)
			}
		})
	}
	if rows != len(names) || rows == 0 {
		t.Fatalf("%d rows, %d names", rows, len(names))
	}
}

// frozenWrites is what each metadata level writes, per command type: a
// level, once shipped, writes these versions forever, since an agent
// that supports the level reads no others. Level 1 is what builds before
// feature levels wrote. A new command or version needs a new level: add
// a column, never change one.
var frozenWrites = map[int16]map[CommandType]uint16{
	MetadataLevel1: {
		TypeCreateTopic: 1, TypeDeleteTopic: 1, TypeCreatePartitions: 1, TypeAlterConfigs: 1,
		TypeCommitObject: 2, TypeOffsetCommit: 1, TypeGroupState: 1, TypeDeleteGroup: 1,
		TypeOffsetDelete: 1, TypeExpireOffsets: 1, TypeDeleteRecords: 1, TypeAgentHeartbeat: 2,
		TypeAllocateProducerID: 1, TypeInitTransactionalProducer: 1, TypeAddPartitionsToTxn: 1,
		TypeAddOffsetsToTxn: 1, TypeTxnOffsetCommit: 1, TypeEndTxn: 2, TypeTxnSweep: 1,
	},
	MetadataLevel2: {
		TypeCreateTopic: 1, TypeDeleteTopic: 1, TypeCreatePartitions: 1, TypeAlterConfigs: 1,
		TypeCommitObject: 2, TypeOffsetCommit: 1, TypeGroupState: 1, TypeDeleteGroup: 1,
		TypeOffsetDelete: 1, TypeExpireOffsets: 1, TypeDeleteRecords: 1, TypeAgentHeartbeat: 3,
		TypeAllocateProducerID: 1, TypeInitTransactionalProducer: 1, TypeAddPartitionsToTxn: 1,
		TypeAddOffsetsToTxn: 1, TypeTxnOffsetCommit: 1, TypeEndTxn: 2, TypeTxnSweep: 1,
		TypeFinalizeFeatures: 1,
	},
	MetadataLevel3: {
		TypeCreateTopic: 1, TypeDeleteTopic: 1, TypeCreatePartitions: 1, TypeAlterConfigs: 1,
		TypeCommitObject: 2, TypeOffsetCommit: 1, TypeGroupState: 1, TypeDeleteGroup: 1,
		TypeOffsetDelete: 1, TypeExpireOffsets: 1, TypeDeleteRecords: 1, TypeAgentHeartbeat: 3,
		TypeAllocateProducerID: 1, TypeInitTransactionalProducer: 1, TypeAddPartitionsToTxn: 1,
		TypeAddOffsetsToTxn: 1, TypeTxnOffsetCommit: 1, TypeEndTxn: 2, TypeTxnSweep: 1,
		TypeFinalizeFeatures:   1,
		TypeApplyRetention:     1,
		TypeReassignPartitions: 1,
		TypeGCProgress:         1,
		TypeAlterBrokerConfigs: 1,
	},
	MetadataLevel4: {
		TypeCreateTopic: 1, TypeDeleteTopic: 1, TypeCreatePartitions: 1, TypeAlterConfigs: 1,
		TypeCommitObject: 2, TypeOffsetCommit: 1, TypeGroupState: 1, TypeDeleteGroup: 1,
		TypeOffsetDelete: 1, TypeExpireOffsets: 1, TypeDeleteRecords: 1, TypeAgentHeartbeat: 4,
		TypeAllocateProducerID: 1, TypeInitTransactionalProducer: 1, TypeAddPartitionsToTxn: 1,
		TypeAddOffsetsToTxn: 1, TypeTxnOffsetCommit: 1, TypeEndTxn: 2, TypeTxnSweep: 1,
		TypeFinalizeFeatures:     1,
		TypeApplyRetention:       1,
		TypeReassignPartitions:   1,
		TypeGCProgress:           1,
		TypeAlterBrokerConfigs:   1,
		TypeSwapIndex:            1,
		TypeCreateACLs:           1,
		TypeDeleteACLs:           1,
		TypeAlterClientQuota:     1,
		TypeAlterScramCredential: 1,
	},
	// Level 5 writes what level 4 does: it changes how apply keeps time
	// (logclock.go), not what is written.
	MetadataLevel5: {
		TypeCreateTopic: 1, TypeDeleteTopic: 1, TypeCreatePartitions: 1, TypeAlterConfigs: 1,
		TypeCommitObject: 2, TypeOffsetCommit: 1, TypeGroupState: 1, TypeDeleteGroup: 1,
		TypeOffsetDelete: 1, TypeExpireOffsets: 1, TypeDeleteRecords: 1, TypeAgentHeartbeat: 4,
		TypeAllocateProducerID: 1, TypeInitTransactionalProducer: 1, TypeAddPartitionsToTxn: 1,
		TypeAddOffsetsToTxn: 1, TypeTxnOffsetCommit: 1, TypeEndTxn: 2, TypeTxnSweep: 1,
		TypeFinalizeFeatures:     1,
		TypeApplyRetention:       1,
		TypeReassignPartitions:   1,
		TypeGCProgress:           1,
		TypeAlterBrokerConfigs:   1,
		TypeSwapIndex:            1,
		TypeCreateACLs:           1,
		TypeDeleteACLs:           1,
		TypeAlterClientQuota:     1,
		TypeAlterScramCredential: 1,
	},
	MetadataLevel6: {
		TypeCreateTopic: 1, TypeDeleteTopic: 1, TypeCreatePartitions: 1, TypeAlterConfigs: 1,
		TypeCommitObject: 2, TypeOffsetCommit: 1, TypeGroupState: 1, TypeDeleteGroup: 1,
		TypeOffsetDelete: 1, TypeExpireOffsets: 1, TypeDeleteRecords: 1, TypeAgentHeartbeat: 4,
		TypeAllocateProducerID: 1, TypeInitTransactionalProducer: 1, TypeAddPartitionsToTxn: 1,
		TypeAddOffsetsToTxn: 1, TypeTxnOffsetCommit: 1, TypeEndTxn: 2, TypeTxnSweep: 1,
		TypeFinalizeFeatures:     1,
		TypeApplyRetention:       1,
		TypeReassignPartitions:   1,
		TypeGCProgress:           1,
		TypeAlterBrokerConfigs:   1,
		TypeSwapIndex:            1,
		TypeCreateACLs:           1,
		TypeDeleteACLs:           1,
		TypeAlterClientQuota:     1,
		TypeAlterScramCredential: 1,
		TypeRegisterSchema:       1,
		TypeDeleteSchemas:        1,
		TypeSchemaConfig:         1,
	},
	MetadataLevel7: {
		TypeCreateTopic: 1, TypeDeleteTopic: 1, TypeCreatePartitions: 1, TypeAlterConfigs: 1,
		TypeCommitObject: 2, TypeOffsetCommit: 1, TypeGroupState: 1, TypeDeleteGroup: 1,
		TypeOffsetDelete: 1, TypeExpireOffsets: 1, TypeDeleteRecords: 1, TypeAgentHeartbeat: 4,
		TypeAllocateProducerID: 1, TypeInitTransactionalProducer: 1, TypeAddPartitionsToTxn: 1,
		TypeAddOffsetsToTxn: 1, TypeTxnOffsetCommit: 1, TypeEndTxn: 2, TypeTxnSweep: 1,
		TypeFinalizeFeatures:     1,
		TypeApplyRetention:       1,
		TypeReassignPartitions:   1,
		TypeGCProgress:           1,
		TypeAlterBrokerConfigs:   1,
		TypeSwapIndex:            1,
		TypeCreateACLs:           1,
		TypeDeleteACLs:           1,
		TypeAlterClientQuota:     1,
		TypeAlterScramCredential: 1,
		TypeRegisterSchema:       1,
		TypeDeleteSchemas:        1,
		TypeSchemaConfig:         1,
		TypeCreateRelation:       1,
		TypeDropRelation:         1,
	},
	MetadataLevel8: {
		TypeCreateTopic: 1, TypeDeleteTopic: 1, TypeCreatePartitions: 1, TypeAlterConfigs: 1,
		TypeCommitObject: 2, TypeOffsetCommit: 1, TypeGroupState: 1, TypeDeleteGroup: 1,
		TypeOffsetDelete: 1, TypeExpireOffsets: 1, TypeDeleteRecords: 1, TypeAgentHeartbeat: 4,
		TypeAllocateProducerID: 1, TypeInitTransactionalProducer: 1, TypeAddPartitionsToTxn: 1,
		TypeAddOffsetsToTxn: 1, TypeTxnOffsetCommit: 1, TypeEndTxn: 2, TypeTxnSweep: 1,
		TypeFinalizeFeatures:     1,
		TypeApplyRetention:       1,
		TypeReassignPartitions:   1,
		TypeGCProgress:           1,
		TypeAlterBrokerConfigs:   1,
		TypeSwapIndex:            1,
		TypeCreateACLs:           1,
		TypeDeleteACLs:           1,
		TypeAlterClientQuota:     1,
		TypeAlterScramCredential: 1,
		TypeRegisterSchema:       1,
		TypeDeleteSchemas:        1,
		TypeSchemaConfig:         1,
		TypeCreateRelation:       1,
		TypeDropRelation:         1,
		TypePutConnector:         1,
		TypeDeleteConnector:      1,
		TypeConnectorTargetState: 1,
		TypeRestartConnector:     1,
		TypeConnectorTaskStatus:  1,
	},
	LevelShareGroups: {
		TypeCreateTopic: 1, TypeDeleteTopic: 1, TypeCreatePartitions: 1, TypeAlterConfigs: 1,
		TypeCommitObject: 2, TypeOffsetCommit: 1, TypeGroupState: 1, TypeDeleteGroup: 1,
		TypeOffsetDelete: 1, TypeExpireOffsets: 1, TypeDeleteRecords: 1, TypeAgentHeartbeat: 4,
		TypeAllocateProducerID: 1, TypeInitTransactionalProducer: 1, TypeAddPartitionsToTxn: 1,
		TypeAddOffsetsToTxn: 1, TypeTxnOffsetCommit: 1, TypeEndTxn: 2, TypeTxnSweep: 1,
		TypeFinalizeFeatures:     1,
		TypeApplyRetention:       1,
		TypeReassignPartitions:   1,
		TypeGCProgress:           1,
		TypeAlterBrokerConfigs:   1,
		TypeSwapIndex:            1,
		TypeCreateACLs:           1,
		TypeDeleteACLs:           1,
		TypeAlterClientQuota:     1,
		TypeAlterScramCredential: 1,
		TypeRegisterSchema:       1,
		TypeDeleteSchemas:        1,
		TypeSchemaConfig:         1,
		TypeCreateRelation:       1,
		TypeDropRelation:         1,
		TypePutConnector:         1,
		TypeDeleteConnector:      1,
		TypeConnectorTargetState: 1,
		TypeRestartConnector:     1,
		TypeConnectorTaskStatus:  1,
		TypeShareInit:            1,
		TypeShareAcquire:         1,
		TypeShareAck:             1,
		TypeShareRelease:         1,
		TypeShareStateAlter:      1,
		TypeShareStateDelete:     1,
		TypeShareGroupState:      1,
		TypeAlterGroupConfigs:    1,
	},
}

// TestLevelWrites checks the table against frozenWrites, and that
// EncodeCommandAt writes at each level what the table says, and the
// newest version at the highest.
func TestLevelWrites(t *testing.T) {
	if len(frozenWrites) != int(MaxMetadataLevel) {
		t.Fatalf("frozenWrites has %d levels, this build %d: a level needs its column", len(frozenWrites), MaxMetadataLevel)
	}
	for level := MetadataLevel1; level <= MaxMetadataLevel; level++ {
		want := frozenWrites[level]
		got := map[CommandType]uint16{}
		for i := range commandTable {
			if s := specOf(CommandType(i)); s != nil {
				if v, ok := s.writeVersion(level); ok {
					got[CommandType(i)] = v
				}
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("level %d writes %v, want %v", level, got, want)
		}
		for _, c := range seedCommands() {
			rc, err := EncodeCommandAt(c, level)
			v, ok := want[c.Type()]
			if r, raises := c.(levelRaiser); raises && r.raisesTo() > level {
				v, ok = frozenWrites[r.raisesTo()][c.Type()]
			}
			switch {
			case !ok && !errors.Is(err, ErrNotAtLevel):
				t.Errorf("level %d: %v encoded (%v, %v), want ErrNotAtLevel", level, c.Type(), rc.Version, err)
			case ok && (err != nil || rc.Version != v):
				t.Errorf("level %d: %v encoded as version %d (%v), want %d", level, c.Type(), rc.Version, err, v)
			case ok:
				if _, err := DecodeCommand(rc); err != nil {
					t.Errorf("level %d: %v does not decode: %v", level, c.Type(), err)
				}
			}
			if level == MaxMetadataLevel && ok && v != c.version() {
				t.Errorf("%v: the highest level writes version %d, its encoder version %d", c.Type(), v, c.version())
			}
		}
	}
}

// checkRoundTrip decodes rc and checks that encoding the command again at
// rc's version (with legacy for an old one) gives rc's bytes.
func checkRoundTrip(t *testing.T, rc RawCommand, legacy func(Command) []byte) {
	t.Helper()
	c, err := DecodeCommand(rc)
	if err != nil {
		t.Fatalf("version %d: %v", rc.Version, err)
	}
	again := EncodeCommand(c)
	if legacy != nil {
		again = RawCommand{Type: rc.Type, Version: rc.Version, Payload: legacy(c)}
	}
	if again.Version != rc.Version || !bytes.Equal(again.Payload, rc.Payload) {
		t.Errorf("version %d re-encodes as version %d %x, want %x", rc.Version, again.Version, again.Payload, rc.Payload)
	}
}

// scenarioCommandNames returns the commands the scenarios propose, read
// from the files without running them.
func scenarioCommandNames(t *testing.T) map[string]bool {
	names := map[string]bool{}
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "propose" {
				for _, line := range strings.Split(d.Input, "\n") {
					if f := strings.Fields(line); len(f) > 0 && f[0] != "-" {
						names[f[0]] = true
					}
				}
			}
			return d.Expected
		})
	})
	return names
}
