package meta

// The command table: everything this build knows of each command type, in
// one place. DecodeCommand, EncodeCommandAt, apply and CommandType.String
// all read it, and TestCommandTable walks it: every row needs a fuzz
// seed, a round trip at every version it decodes and a scenario that
// applies it, and every metadata level must write the versions it always
// wrote. Adding a command is a row here plus the command's own file (its
// type, encoder, decoders and apply); a new command or version is
// written from a new metadata level (features.go), never from one a
// build already shipped.

// partitionUse says how a command's apply reaches partition state
// (0x03), which the Applier caches across commands so that a run of
// commits writes each partition once per batch (see Applier.parts).
type partitionUse uint8

const (
	// partitionsNone: the command neither reads nor writes partition
	// state. The cache stays as it is.
	partitionsNone partitionUse = iota
	// partitionsCached: the command reads and writes partition state
	// only through the cache (Applier.part). The cache stays.
	partitionsCached
	// partitionsDirect: the command writes or deletes partition keys in
	// the batch itself (creating or deleting partitions). Apply writes
	// the cache's dirty states and drops it first, so the cache neither
	// overwrites the command's changes at Finish nor answers from a
	// state the command replaced.
	partitionsDirect
)

// commandSpec is one command type's row.
type commandSpec struct {
	name string
	// decoders holds a decoder per version this build reads.
	decoders   []versionDecoder
	apply      func(a *Applier, c Command) (Result, error)
	partitions partitionUse
}

// versionDecoder decodes one version's payload, all of it, or fails with
// the codec's error. Each decoder makes its own reader: one passed in
// through the table's func values would escape to the heap, an
// allocation per command on the apply path.
type versionDecoder struct {
	version uint16
	// since is the lowest strand.metadata.version at which this build
	// writes the version (features.go); 0 for a version it only reads.
	since  int16
	decode func(payload []byte) (Command, error)
}

// decoder returns the decoder of version v, nil if this build does not
// read it.
func (s *commandSpec) decoder(v uint16) func(payload []byte) (Command, error) {
	for _, d := range s.decoders {
		if d.version == v {
			return d.decode
		}
	}
	return nil
}

// writeVersion returns the version this build writes at metadata level
// level: the highest one written from that level or below. False if it
// writes none there (a command newer than the level).
func (s *commandSpec) writeVersion(level int16) (uint16, bool) {
	var v uint16
	ok := false
	for _, d := range s.decoders {
		if d.since != 0 && d.since <= level && (!ok || d.version > v) {
			v, ok = d.version, true
		}
	}
	return v, ok
}

// decoderOf is a typed decoder, so that a row's decoders and its apply
// agree on the command's type.
type decoderOf[C Command] struct {
	version uint16
	since   int16
	decode  func(payload []byte) (C, error)
}

// version is a version this build reads; writtenFrom says from which
// metadata level it also writes it.
func version[C Command](v uint16, decode func(payload []byte) (C, error)) decoderOf[C] {
	return decoderOf[C]{version: v, decode: decode}
}

// writtenFrom marks the version as written from metadata level on. A
// level's versions never change once a build shipped it: an agent that
// supports the level must read everything written at it. A new version
// comes with a new level (features.go), and TestCommandTable holds every
// level's versions (frozenWrites).
func (d decoderOf[C]) writtenFrom(level int16) decoderOf[C] {
	d.since = level
	return d
}

// row builds a table row. The apply and the decoders take and return the
// concrete command type; the row adapts them to Command.
func row[C Command](name string, partitions partitionUse, apply func(*Applier, C) (Result, error), decoders ...decoderOf[C]) commandSpec {
	s := commandSpec{
		name:       name,
		partitions: partitions,
		apply:      func(a *Applier, c Command) (Result, error) { return apply(a, c.(C)) },
	}
	for _, d := range decoders {
		s.decoders = append(s.decoders, versionDecoder{d.version, d.since, func(p []byte) (Command, error) {
			c, err := d.decode(p)
			return c, err
		}})
	}
	return s
}

// commandTable is indexed by CommandType.
var commandTable = [...]commandSpec{
	TypeCreateTopic: row("CreateTopic", partitionsDirect, (*Applier).createTopic,
		version(1, decodeCreateTopicV1).writtenFrom(MetadataLevel1)),
	TypeDeleteTopic: row("DeleteTopic", partitionsDirect, (*Applier).deleteTopic,
		version(1, decodeDeleteTopicV1).writtenFrom(MetadataLevel1)),
	TypeCreatePartitions: row("CreatePartitions", partitionsDirect, (*Applier).createPartitions,
		version(1, decodeCreatePartitionsV1).writtenFrom(MetadataLevel1)),
	TypeAlterConfigs: row("AlterConfigs", partitionsNone, (*Applier).alterConfigs,
		version(1, decodeAlterConfigsV1).writtenFrom(MetadataLevel1)),
	TypeCommitObject: row("CommitObject", partitionsCached, (*Applier).commitObject,
		version(1, decodeCommitObjectV1), version(2, decodeCommitObjectV2).writtenFrom(MetadataLevel1)),

	TypeOffsetCommit: row("OffsetCommit", partitionsNone, (*Applier).offsetCommit,
		version(1, decodeOffsetCommitV1).writtenFrom(MetadataLevel1)),
	TypeGroupState: row("GroupState", partitionsNone, (*Applier).groupState,
		version(1, decodeGroupStateV1).writtenFrom(MetadataLevel1)),
	TypeDeleteGroup: row("DeleteGroup", partitionsNone, (*Applier).deleteGroup,
		version(1, decodeDeleteGroupV1).writtenFrom(MetadataLevel1)),
	TypeOffsetDelete: row("OffsetDelete", partitionsNone, (*Applier).offsetDelete,
		version(1, decodeOffsetDeleteV1).writtenFrom(MetadataLevel1)),
	TypeExpireOffsets: row("ExpireOffsets", partitionsNone, (*Applier).expireOffsets,
		version(1, decodeExpireOffsetsV1).writtenFrom(MetadataLevel1)),

	TypeDeleteRecords: row("DeleteRecords", partitionsCached, (*Applier).deleteRecords,
		version(1, decodeDeleteRecordsV1).writtenFrom(MetadataLevel1)),
	TypeAgentHeartbeat: row("AgentHeartbeat", partitionsNone, (*Applier).agentHeartbeat,
		version(1, decodeAgentHeartbeatV1), version(2, decodeAgentHeartbeatV2).writtenFrom(MetadataLevel1),
		version(3, decodeAgentHeartbeatV3).writtenFrom(MetadataLevel2),
		version(4, decodeAgentHeartbeatV4).writtenFrom(MetadataLevel4)),
	TypeAllocateProducerID: row("AllocateProducerID", partitionsNone, (*Applier).allocateProducerID,
		version(1, decodeAllocateProducerIDV1).writtenFrom(MetadataLevel1)),

	// Transactions write their markers through the partition cache.
	TypeInitTransactionalProducer: row("InitTransactionalProducer", partitionsCached, (*Applier).initTxnProducer,
		version(1, decodeInitTransactionalProducerV1).writtenFrom(MetadataLevel1)),
	TypeAddPartitionsToTxn: row("AddPartitionsToTxn", partitionsNone, (*Applier).addPartitionsToTxn,
		version(1, decodeAddPartitionsToTxnV1).writtenFrom(MetadataLevel1)),
	TypeAddOffsetsToTxn: row("AddOffsetsToTxn", partitionsNone, (*Applier).addOffsetsToTxn,
		version(1, decodeAddOffsetsToTxnV1).writtenFrom(MetadataLevel1)),
	TypeTxnOffsetCommit: row("TxnOffsetCommit", partitionsNone, (*Applier).txnOffsetCommit,
		version(1, decodeTxnOffsetCommitV1).writtenFrom(MetadataLevel1)),
	TypeEndTxn: row("EndTxn", partitionsCached, (*Applier).endTxn,
		version(1, decodeEndTxnV1), version(2, decodeEndTxnV2).writtenFrom(MetadataLevel1)),
	TypeTxnSweep: row("TxnSweep", partitionsCached, (*Applier).txnSweep,
		version(1, decodeTxnSweepV1).writtenFrom(MetadataLevel1)),

	// Feature levels (features.go).
	TypeFinalizeFeatures: row("FinalizeFeatures", partitionsNone, (*Applier).finalizeFeatures,
		version(1, decodeFinalizeFeaturesV1).writtenFrom(MetadataLevel2)),

	// Retention (retention.go) moves log starts through the cache.
	TypeApplyRetention: row("ApplyRetention", partitionsCached, (*Applier).applyRetention,
		version(1, decodeApplyRetentionV1).writtenFrom(MetadataLevel3)),
	// Replica lists (replicas.go).
	TypeReassignPartitions: row("ReassignPartitions", partitionsNone, (*Applier).reassignPartitions,
		version(1, decodeReassignPartitionsV1).writtenFrom(MetadataLevel3)),
	// Object garbage collection (gc.go).
	TypeGCProgress: row("GCProgress", partitionsNone, (*Applier).gcProgress,
		version(1, decodeGCProgressV1).writtenFrom(MetadataLevel3)),
	// Compaction's index swap (compact.go).
	TypeSwapIndex: row("SwapIndex", partitionsCached, (*Applier).swapIndex,
		version(1, decodeSwapIndexV1).writtenFrom(MetadataLevel4)),
	// Dynamic broker configs (brokerconfig.go).
	TypeAlterBrokerConfigs: row("AlterBrokerConfigs", partitionsNone, (*Applier).alterBrokerConfigs,
		version(1, decodeAlterBrokerConfigsV1).writtenFrom(MetadataLevel3)),
	// ACLs (acl.go).
	TypeCreateACLs: row("CreateACLs", partitionsNone, (*Applier).createACLs,
		version(1, decodeCreateACLsV1).writtenFrom(MetadataLevel4)),
	TypeDeleteACLs: row("DeleteACLs", partitionsNone, (*Applier).deleteACLs,
		version(1, decodeDeleteACLsV1).writtenFrom(MetadataLevel4)),
	// Client quotas (quota.go).
	TypeAlterClientQuota: row("AlterClientQuota", partitionsNone, (*Applier).alterClientQuota,
		version(1, decodeAlterClientQuotaV1).writtenFrom(MetadataLevel4)),
	// SCRAM credentials (scram.go).
	TypeAlterScramCredential: row("AlterScramCredential", partitionsNone, (*Applier).alterScramCredential,
		version(1, decodeAlterScramCredentialV1).writtenFrom(MetadataLevel4)),

	TypeRegisterSchema: row("RegisterSchema", partitionsNone, (*Applier).registerSchema,
		version(1, decodeRegisterSchemaV1).writtenFrom(MetadataLevel6)),
	TypeDeleteSchemas: row("DeleteSchemas", partitionsNone, (*Applier).deleteSchemas,
		version(1, decodeDeleteSchemasV1).writtenFrom(MetadataLevel6)),
	TypeSchemaConfig: row("SchemaConfig", partitionsNone, (*Applier).schemaConfig,
		version(1, decodeSchemaConfigV1).writtenFrom(MetadataLevel6)),

	// The SQL catalog (sql.go).
	TypeCreateRelation: row("CreateRelation", partitionsNone, (*Applier).createRelation,
		version(1, decodeCreateRelationV1).writtenFrom(MetadataLevel7)),
	TypeDropRelation: row("DropRelation", partitionsNone, (*Applier).dropRelation,
		version(1, decodeDropRelationV1).writtenFrom(MetadataLevel7)),

	// Connectors (connect.go).
	TypePutConnector: row("PutConnector", partitionsNone, (*Applier).putConnector,
		version(1, decodePutConnectorV1).writtenFrom(MetadataLevel8)),
	TypeDeleteConnector: row("DeleteConnector", partitionsNone, (*Applier).deleteConnector,
		version(1, decodeDeleteConnectorV1).writtenFrom(MetadataLevel8)),
	TypeConnectorTargetState: row("ConnectorTargetState", partitionsNone, (*Applier).connectorTargetState,
		version(1, decodeConnectorTargetStateV1).writtenFrom(MetadataLevel8)),
	TypeRestartConnector: row("RestartConnector", partitionsNone, (*Applier).restartConnector,
		version(1, decodeRestartConnectorV1).writtenFrom(MetadataLevel8)),
	TypeConnectorTaskStatus: row("ConnectorTaskStatus", partitionsNone, (*Applier).connectorTaskStatus,
		version(1, decodeConnectorTaskStatusV1).writtenFrom(MetadataLevel8)),

	// Share group membership and group configs (share_group.go).
	TypeShareGroupState: row("ShareGroupState", partitionsNone, (*Applier).shareGroupState,
		version(1, decodeShareGroupStateV1).writtenFrom(LevelShareGroups)),
	TypeAlterGroupConfigs: row("AlterGroupConfigs", partitionsNone, (*Applier).alterGroupConfigs,
		version(1, decodeAlterGroupConfigsV1).writtenFrom(LevelShareGroups)),
	// Share partitions (share_state.go). ShareInit, ShareAcquire and
	// ShareStateAlter read the partition's log start through the cache.
	TypeShareInit: row("ShareInit", partitionsCached, (*Applier).shareInit,
		version(1, decodeShareInitV1).writtenFrom(LevelShareGroups)),
	TypeShareAcquire: row("ShareAcquire", partitionsCached, (*Applier).shareAcquire,
		version(1, decodeShareAcquireV1).writtenFrom(LevelShareGroups)),
	TypeShareAck: row("ShareAck", partitionsCached, (*Applier).shareAck,
		version(1, decodeShareAckV1).writtenFrom(LevelShareGroups)),
	TypeShareRelease: row("ShareRelease", partitionsNone, (*Applier).shareRelease,
		version(1, decodeShareReleaseV1).writtenFrom(LevelShareGroups)),
	TypeShareStateAlter: row("ShareStateAlter", partitionsCached, (*Applier).shareStateAlter,
		version(1, decodeShareStateAlterV1).writtenFrom(LevelShareGroups)),
	TypeShareStateDelete: row("ShareStateDelete", partitionsNone, (*Applier).shareStateDelete,
		version(1, decodeShareStateDeleteV1).writtenFrom(LevelShareGroups)),
}

// specOf returns t's row, nil for a type this build does not know.
func specOf(t CommandType) *commandSpec {
	if int(t) < len(commandTable) && commandTable[t].name != "" {
		return &commandTable[t]
	}
	return nil
}
