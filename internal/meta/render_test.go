package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Rendering for the scenarios: results and state as a reviewer reads
// them, topic ids by name.

// codeName is a Kafka error code's name, "ok" for none.
func codeName(code int16) string {
	if code == 0 {
		return "ok"
	}
	if e := kerr.TypedErrorForCode(code); e != nil {
		return e.Message
	}
	return fmt.Sprintf("code %d", code)
}

func (s *scenario) renderResult(b *strings.Builder, c Command, res Result) {
	fmt.Fprintf(b, "%v: %s", c.Type(), codeName(res.Code))
	if res.Message != "" {
		fmt.Fprintf(b, " (%s)", res.Message)
	}
	if !res.TopicID.IsZero() {
		fmt.Fprintf(b, " topic=%s", s.topicName(res.TopicID))
	}
	switch c.(type) {
	case AllocateProducerID, InitTransactionalProducer, EndTxn:
		if res.Code == 0 {
			fmt.Fprintf(b, " producer=%d epoch=%d", res.ProducerID, res.ProducerEpoch)
		}
	case CreateRelation:
		if res.Code == 0 {
			fmt.Fprintf(b, " id=%d", res.RelationID)
		}
	case DropRelation:
		if res.Code == 0 {
			fmt.Fprintf(b, " dropped=%v", res.RelationIDs)
		}
	}
	switch c.(type) {
	case PutConnector, DeleteConnector, ConnectorTargetState, RestartConnector, ConnectorTaskStatus:
		if res.ConnectorCreated {
			b.WriteString(" created")
		}
		if res.ConnectorGeneration != 0 {
			fmt.Fprintf(b, " gen=%d", res.ConnectorGeneration)
		}
		if res.ConnectorError != 0 {
			fmt.Fprintf(b, " http=%d", res.ConnectorError)
		}
	}
	switch c.(type) {
	case ShareInit, ShareAcquire, ShareAck, ShareRelease, ShareStateAlter, ShareStateDelete:
		if res.Code == 0 {
			switch c.(type) {
			case ShareRelease:
				fmt.Fprintf(b, " released=%d", res.ShareReleased)
			case ShareStateDelete:
				fmt.Fprintf(b, " deleted=%d", res.ShareDeleted)
			default:
				fmt.Fprintf(b, " spso=%d", res.ShareStartOffset)
			}
		}
		for _, g := range res.ShareGrants {
			fmt.Fprintf(b, " grant=%d-%d(n=%d)", g.First, g.Last, g.DeliveryCount)
		}
		if res.ShareArchived != 0 {
			fmt.Fprintf(b, " archived=%d", res.ShareArchived)
		}
		if res.ShareLockTimeouts != 0 {
			fmt.Fprintf(b, " timeouts=%d", res.ShareLockTimeouts)
		}
	}
	if res.SQLState != "" {
		fmt.Fprintf(b, " sqlstate=%s", res.SQLState)
	}
	if len(res.RelationSkipped) > 0 {
		fmt.Fprintf(b, " skipped=%v", res.RelationSkipped)
	}
	b.WriteByte('\n')
	// Per-item answers, labelled by what the command named.
	var labels []string
	switch c := c.(type) {
	case CommitObject:
		for _, cb := range c.Batches {
			labels = append(labels, fmt.Sprintf("%s/%d", s.topicName(cb.TopicID), cb.Partition))
		}
	case DeleteRecords:
		for _, p := range c.Partitions {
			labels = append(labels, fmt.Sprintf("%s/%d", s.topicName(p.TopicID), p.Partition))
		}
	case ApplyRetention:
		for _, p := range c.Partitions {
			labels = append(labels, fmt.Sprintf("%s/%d", s.topicName(p.TopicID), p.Partition))
		}
	case OffsetCommit:
		labels = offsetLabels(c.Offsets)
	case TxnOffsetCommit:
		labels = offsetLabels(c.Offsets)
	case OffsetDelete:
		labels = partitionLabels(c.Partitions)
	case AddPartitionsToTxn:
		labels = partitionLabels(c.Partitions)
	case ReassignPartitions:
		for _, p := range c.Partitions {
			labels = append(labels, fmt.Sprintf("%s/%d", c.Topic, p.Partition))
		}
	}
	label := func(i int) string {
		if i < len(labels) {
			return labels[i]
		}
		return fmt.Sprint(i)
	}
	for i, br := range res.Batches {
		fmt.Fprintf(b, "  %s: %s", label(i), codeName(br.Code))
		if _, commit := c.(CommitObject); commit && br.Code == 0 {
			fmt.Fprintf(b, " base=%d", br.BaseOffset)
		}
		if br.Code == 0 || br.LogStartOffset != 0 {
			fmt.Fprintf(b, " logstart=%d", br.LogStartOffset)
		}
		b.WriteByte('\n')
	}
	for i, code := range res.Codes {
		fmt.Fprintf(b, "  %s: %s\n", label(i), codeName(code))
		if i < len(res.DeletedACLs) {
			for _, a := range res.DeletedACLs[i] {
				fmt.Fprintf(b, "    deleted %v\n", a)
			}
		}
	}
}

func offsetLabels(os []OffsetCommitPartition) []string {
	var labels []string
	for _, o := range os {
		labels = append(labels, fmt.Sprintf("%s/%d", o.Topic, o.Partition))
	}
	return labels
}

func partitionLabels(ps []TopicPartition) []string {
	var labels []string
	for _, p := range ps {
		labels = append(labels, fmt.Sprintf("%s/%d", p.Topic, p.Partition))
	}
	return labels
}

// renderState renders writer's copy key by key, after checking that every
// writer of the scenario holds the same state.
func (s *scenario) renderState(t *testing.T, writer, only string) string {
	var want [32]byte
	for _, w := range slices.Sorted(maps.Keys(s.replicas)) {
		r := s.replicas[w]
		mustSync(t, r)
		if d := mustDigest(t, r); want == ([32]byte{}) {
			want = d
		} else if d != want {
			t.Fatalf("writer %s holds another state", w)
		}
	}
	r := s.replica(writer)
	mustSync(t, r)
	s.learnTopics(t, r)
	kinds := map[string]bool{}
	for _, k := range strings.Split(only, ",") {
		if k != "" {
			kinds[k] = true
		}
	}
	v := viewOf(t, r)
	it, err := v.r.NewIter(nil, replicatedEnd)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var b strings.Builder
	for ok := it.First(); ok; ok = it.Next() {
		kind, line, err := s.renderKey(it.Key(), it.Value())
		if err != nil {
			t.Fatalf("key %x: %v", it.Key(), err)
		}
		if len(kinds) == 0 || kinds[kind] {
			fmt.Fprintf(&b, "%s %s\n", kind, line)
		}
	}
	return b.String()
}

// partKey renders a (topic id, partition) at the start of k.
func (s *scenario) partKey(k []byte) string {
	var id TopicID
	copy(id[:], k)
	return fmt.Sprintf("%s/%d", s.topicName(id), binary.BigEndian.Uint32(k[16:]))
}

// renderKey renders one key and value as its kind and a line.
func (s *scenario) renderKey(k, v []byte) (string, string, error) {
	rest := k[1:]
	switch k[0] {
	case prefixTopicName:
		t, err := decodeTopic(v)
		return "topic", fmt.Sprintf("%s: partitions=%d created=%d configs=%s", s.topicName(t.ID), t.Partitions, t.CreatedAt, renderMap(t.Configs)), err
	case prefixTopicID:
		var id TopicID
		copy(id[:], rest)
		return "topic-id", fmt.Sprintf("%s: name=%s", s.topicName(id), v), nil
	case prefixPartition:
		p, err := decodePartitionState(v)
		return "partition", fmt.Sprintf("%s: next=%d logstart=%d", s.partKey(rest), p.NextOffset, p.LogStartOffset), err
	case prefixIndex:
		e, err := decodeIndexEntry(k, v)
		line := fmt.Sprintf("%s@%d: records=%d", s.partKey(rest), e.BaseOffset, e.Records)
		switch {
		case e.Control && e.Commit:
			line += " commit-marker"
		case e.Control:
			line += " abort-marker"
		default:
			line += fmt.Sprintf(" object=%s pos=%d len=%d batches=%d ts=%d..%d", e.ObjectKey, e.Position, e.Length, e.BatchCount, e.FirstTimestamp, e.MaxTimestamp)
		}
		if e.ProducerID >= 0 {
			line += fmt.Sprintf(" producer=%d epoch=%d seq=%d", e.ProducerID, e.ProducerEpoch, e.BaseSequence)
		}
		if e.Transactional {
			line += " transactional"
		}
		if e.OwnOffsets {
			line += " own-offsets"
		}
		return "index", line, err
	case prefixObject:
		r := recordReader(v)
		line := fmt.Sprintf("%s: size=%d committed=%d batches=%d", rest, r.varint(), r.varint(), r.varint())
		return "object", line, r.done()
	case prefixWriter:
		w, err := decodeWriterState(v)
		return "writer", fmt.Sprintf("%s: incarnation=%d seq=%d", rest, w.Incarnation, w.LastSeq), err
	case prefixClock:
		c, err := decodeUint64("clock", v)
		return "clock", fmt.Sprint(c), err
	case prefixApplied:
		p, err := decodeUint64("applied", v)
		return "applied", fmt.Sprint(p), err
	case prefixGroup:
		g, err := decodeGroup(string(rest), v)
		line := fmt.Sprintf("%s: %v type=%q protocol=%q generation=%d leader=%q state-at=%d", g.Name, g.Kind, g.ProtocolType, g.Protocol, g.Generation, g.Leader, g.StateTimestamp)
		if g.SubscribedKnown {
			line += " subscribed=" + strings.Join(g.Subscribed, ",")
		}
		for _, m := range g.Members {
			line += fmt.Sprintf(" member=%s", m.MemberID)
		}
		return "group", line, err
	case prefixGroupOffset:
		n := int(binary.BigEndian.Uint16(rest))
		id, p, ok := splitGroupOffsetKey(k, n)
		if !ok {
			return "", "", errRange
		}
		o, err := decodeCommittedOffset(id, p, v)
		return "offset", fmt.Sprintf("%s %s/%d: %d epoch=%d metadata=%q at=%d expire=%d", rest[2:2+n], s.topicName(id), p, o.Offset, o.LeaderEpoch, o.Metadata, o.CommitTimestamp, o.ExpireTimestamp), err
	case prefixTopicGroup:
		var id TopicID
		copy(id[:], rest)
		return "topic-group", fmt.Sprintf("%s: %s", s.topicName(id), rest[16:]), nil
	case prefixAgent:
		a, err := decodeAgentInfo(k, v)
		line := fmt.Sprintf("%d: id=%s addr=%s:%d rack=%q lease=%d registered=%d expires=%d applied=%d", a.NodeID, a.AgentID, a.Host, a.Port, a.Rack, a.LeaseMs, a.RegisteredAt, a.Expires, a.Applied)
		for _, e := range a.Endpoints {
			line += fmt.Sprintf(" %s://%s:%d", e.Listener, e.Host, e.Port)
		}
		for _, f := range a.Features {
			line += fmt.Sprintf(" %s=%s", f.Name, f)
		}
		return "agent", line, err
	case prefixFeatures:
		f, err := decodeFinalizedFeatures(v)
		line := fmt.Sprintf("epoch=%d", f.Epoch)
		for _, l := range f.Levels {
			line += fmt.Sprintf(" %s=%d", l.Name, l.Level)
		}
		return "features", line, err
	case prefixClusterID:
		return "cluster-id", fmt.Sprintf("%q", v[1:]), nil
	case prefixProducerNextID:
		r := recordReader(v)
		return "next-producer-id", fmt.Sprint(r.varint()), r.done()
	case prefixProducerState:
		st, err := decodeProducerState(v)
		line := fmt.Sprintf("%s producer=%d: epoch=%d last-write=%d", s.partKey(rest), binary.BigEndian.Uint64(rest[20:]), st.Epoch, st.LastWriteMs)
		for _, pb := range st.Batches {
			line += fmt.Sprintf(" seq=%d..%d@%d", pb.FirstSeq, pb.LastSeq, pb.BaseOffset)
		}
		return "producer", line, err
	case prefixTxn:
		st, err := decodeTxnState(string(rest), v)
		line := fmt.Sprintf("%s: %v producer=%d epoch=%d prev=%d/%d by=%s seq=%d timeout=%d start=%d updated=%d",
			st.TransactionalID, st.Status, st.ProducerID, st.ProducerEpoch, st.PrevProducerID, st.PrevEpoch,
			[...]string{"init", "request", "timeout", "end-txn"}[st.PrevBy], st.Seq, st.TimeoutMs, st.StartMs, st.UpdatedMs)
		for _, p := range st.Partitions {
			line += fmt.Sprintf(" partition=%s/%d", s.topicName(p.TopicID), p.Partition)
		}
		for _, g := range st.Groups {
			line += " group=" + g
		}
		return "txn", line, err
	case prefixOpenTxn:
		o, err := decodeOpenTxn(v)
		return "open-txn", fmt.Sprintf("%s producer=%d: epoch=%d first=%d", s.partKey(rest), binary.BigEndian.Uint64(rest[20:]), o.Epoch, o.FirstOffset), err
	case prefixAbortedTxn:
		r := recordReader(v)
		line := fmt.Sprintf("%s marker=%d: producer=%d first=%d", s.partKey(rest), binary.BigEndian.Uint64(rest[20:]), r.varint(), r.varint())
		return "aborted-txn", line, r.done()
	case prefixPartitionStorage:
		st, err := decodePartitionStorage(v)
		return "storage", fmt.Sprintf("%s: bytes=%d entries=%d", s.partKey(rest), st.Bytes, st.Entries), err
	case prefixTxnOffset:
		n := int(binary.BigEndian.Uint16(rest))
		tail := rest[2+n:]
		var id TopicID
		copy(id[:], tail)
		p := int32(binary.BigEndian.Uint32(tail[16:]))
		po, err := decodePendingTxnOffset(id, p, v)
		return "txn-offset", fmt.Sprintf("%s %s/%d producer=%d: %d epoch=%d metadata=%q at=%d", rest[2:2+n], s.topicName(id), p, po.ProducerID, po.Offset.Offset, po.Offset.LeaderEpoch, po.Offset.Metadata, po.Offset.CommitTimestamp), err
	case prefixReplicas:
		l, err := decodeReplicaList(v)
		return "replicas", fmt.Sprintf("%s: %v", s.partKey(rest), l), err
	case prefixReplicaEpoch:
		var id TopicID
		copy(id[:], rest)
		r := recordReader(v)
		return "replica-epoch", fmt.Sprintf("%s: %d", s.topicName(id), r.uvarint()), r.done()
	case prefixGroupConfigs:
		m, err := decodeGroupConfigs(v)
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			kv = append(kv, k+"="+m[k])
		}
		return "group-configs", fmt.Sprintf("%q: %s", rest, strings.Join(kv, " ")), err
	case prefixBrokerConfigs:
		m, err := decodeBrokerConfigs(v)
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			kv = append(kv, k+"="+m[k])
		}
		return "broker-configs", fmt.Sprintf("%q: %s", rest, strings.Join(kv, " ")), err
	case prefixACL:
		if rest[0] == 0x00 {
			c, err := decodeACLCounter(v)
			return "acl-counter", fmt.Sprintf("generation=%d count=%d", c.Generation, c.Count), err
		}
		r := reader{b: rest[1:]}
		a := r.aclBinding()
		return "acl", a.String(), r.done()
	case prefixClientQuota:
		if len(rest) == 0 {
			n, err := decodeClientQuotaVersion(v)
			return "client-quota-version", fmt.Sprint(n), err
		}
		r := &reader{b: rest}
		e := r.quotaEntity()
		m, err := decodeClientQuotaValues(v)
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			kv = append(kv, fmt.Sprintf("%s=%g", k, m[k]))
		}
		return "client-quota", fmt.Sprintf("user=%s client-id=%s: %s", renderQuotaName(e.User), renderQuotaName(e.ClientID), strings.Join(kv, " ")), errors.Join(r.done(), err)
	case prefixScram:
		c, err := decodeScramCredential(k, v)
		return "scram", fmt.Sprintf("%s %v: iterations=%d salt=%q stored=%x server=%x", c.User, c.Mechanism, c.Iterations, c.Salt, c.StoredKey[:min(4, len(c.StoredKey))], c.ServerKey[:min(4, len(c.ServerKey))]), err
	case prefixSchema:
		id := int32(binary.BigEndian.Uint32(rest))
		sc, err := decodeStoredSchema(id, v)
		return "schema", fmt.Sprintf("id=%d %s %s refs=%v", id, sc.SchemaType, sc.Schema, sc.References), err
	case prefixSchemaContent:
		return "schema-content", fmt.Sprintf("%x: id=%d", rest[:4], binary.BigEndian.Uint32(v)), nil
	case prefixSchemaSubject:
		ver := int32(binary.BigEndian.Uint32(rest[len(rest)-4:]))
		sv, err := decodeSchemaVersion(ver, v)
		return "schema-version", fmt.Sprintf("%q v%d: id=%d deleted=%v", rest[:len(rest)-5], ver, sv.ID, sv.Deleted), err
	case prefixSchemaConfig:
		c, err := decodeSchemaConfig(v)
		name := "<global>"
		if rest[0] == 1 {
			name = fmt.Sprintf("%q", rest[1:])
		}
		return "schema-config", fmt.Sprintf("%s: compatibility=%q mode=%q", name, c.Compatibility, c.Mode), err
	case prefixSchemaNextID:
		return "schema-next-id", fmt.Sprint(binary.BigEndian.Uint32(v)), nil
	case prefixRelationName:
		return "relation-name", fmt.Sprintf("%q: id=%d", rest, binary.BigEndian.Uint64(v)), nil
	case prefixRelation:
		id := binary.BigEndian.Uint64(rest)
		rel, err := decodeRelation(id, v)
		return "relation", fmt.Sprintf("id=%d %v %q cols=%v topic=%q format=%q options=%v query=%q deps=%v owner=%q sql=%q",
			id, rel.Kind, rel.Name, rel.Columns, rel.Topic, rel.Format, rel.Options, rel.Query, rel.DependsOn, rel.Owner, rel.SQL), err
	case prefixRelationDep:
		return "relation-dep", fmt.Sprintf("%d read by %d", binary.BigEndian.Uint64(rest[:8]), binary.BigEndian.Uint64(rest[8:])), nil
	case prefixRelationCounter:
		c, err := decodeRelationCounter(v)
		return "relation-counter", fmt.Sprintf("next=%d count=%d", c.Next, c.Count), err
	case prefixConnector:
		c, err := decodeConnector(v)
		return "connector", fmt.Sprintf("%q owner=%q state=%v gen=%d config=%s task=gen %d %v node=%d worker=%q trace=%q",
			c.Name, c.Owner, c.State, c.Generation, renderMap(c.Config), c.Task.Generation, c.Task.State, c.Task.Node, c.Task.Worker, c.Task.Trace), err
	case prefixShareState:
		st, err := decodeShareState(k, v)
		var runs []string
		for _, r := range st.Runs {
			run := fmt.Sprintf("%d-%d %v", r.First, r.Last, r.State)
			if r.DeliveryCount != 0 {
				run += fmt.Sprintf(" n=%d", r.DeliveryCount)
			}
			if r.State == ShareAcquired {
				run += fmt.Sprintf(" %s until=%d", r.Member, r.Deadline)
			}
			runs = append(runs, "["+run+"]")
		}
		return "share-state", fmt.Sprintf("%s %s/%d: spso=%d speo=%d epoch=%d %s", st.Group, s.topicName(st.TopicID), st.Partition,
			st.StartOffset, st.EndOffset, st.StateEpoch, strings.Join(runs, " ")), err
	case prefixConnectorCounter:
		n, err := readConnectorCount(func([]byte) ([]byte, bool, error) { return v, true, nil })
		return "connector-count", fmt.Sprint(n), err
	case prefixObjectRefs:
		n, err := decodeObjectRefs(v)
		return "object-refs", fmt.Sprintf("%s: %d", rest, n), err
	case prefixDeadObject:
		r := recordReader(v)
		line := fmt.Sprintf("%s died=%d: size=%d", rest[8:], binary.BigEndian.Uint64(rest), r.varint())
		return "dead-object", line, r.done()
	case prefixGC:
		g, err := decodeGCState(v)
		return "gc", fmt.Sprintf("grace=%d floor=%d reconciled-to=%d live=%d/%dB dead=%d/%dB deleted=%d/%dB orphans=%d/%dB",
			g.GraceMs, g.FloorMs, g.ReconciledTo, g.LiveObjects, g.LiveBytes, g.DeadObjects, g.DeadBytes,
			g.DeletedObjects, g.DeletedBytes, g.Orphans, g.OrphanBytes), err
	}
	return "", "", fmt.Errorf("no rendering of prefix %#x", k[0])
}

func renderMap(m map[string]string) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+":"+m[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// renderView renders one of the View's derived reads.
func (s *scenario) renderView(t *testing.T, d *datadriven.TestData, writer string) string {
	r := s.replica(writer)
	mustSync(t, r)
	v := viewOf(t, r)
	if len(d.CmdArgs) == 0 {
		d.Fatalf(t, "view what?")
	}
	var b strings.Builder
	switch what := d.CmdArgs[0].Key; what {
	case "lso":
		var topic string
		var p int
		d.ScanArgs(t, "topic", &topic)
		d.ScanArgs(t, "partition", &p)
		id, partition := s.topicID(topic), int32(p)
		st, _, err := v.Partition(id, partition)
		if err != nil {
			t.Fatal(err)
		}
		lso, err := v.LastStableOffset(id, partition, st.HighWatermark())
		if err != nil {
			t.Fatal(err)
		}
		aborted, err := v.AbortedTxns(id, partition, 0, st.HighWatermark(), 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "high-watermark=%d last-stable=%d\n", st.HighWatermark(), lso)
		for _, a := range aborted {
			fmt.Fprintf(&b, "aborted producer=%d offsets=%d..%d\n", a.ProducerID, a.FirstOffset, a.LastOffset)
		}
	case "features":
		f, err := v.Features()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "epoch=%d", f.Epoch)
		for _, l := range f.Levels {
			fmt.Fprintf(&b, " %s=%d", l.Name, l.Level)
		}
		fmt.Fprintf(&b, " (metadata level %d)\n", f.MetadataLevel())
	case "live-agents":
		live, err := v.LiveAgents()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range live {
			fmt.Fprintf(&b, "%d %s expires=%d\n", a.NodeID, a.AgentID, a.Expires)
		}
	case "offsets":
		var group string
		d.ScanArgs(t, "group", &group)
		os, err := v.CommittedOffsets(group)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range os {
			fmt.Fprintf(&b, "%s/%d: %d\n", o.Topic, o.Partition, o.Offset)
		}
	case "retention-due":
		// What a retention proposer checks: the topic's policy over
		// the broker defaults ms and bytes, at the proposer's clock.
		var topic string
		var p int
		ms, bytes := int64(-1), int64(-1)
		d.ScanArgs(t, "topic", &topic)
		d.ScanArgs(t, "partition", &p)
		d.MaybeScanArgs(t, "ms", &ms)
		d.MaybeScanArgs(t, "bytes", &bytes)
		tp, _, err := v.Topic(topic)
		if err != nil {
			t.Fatal(err)
		}
		start, due, err := v.RetentionDue(tp.ID, int32(p), RetentionPolicyOf(tp.Configs, ms, bytes), s.now)
		if err != nil {
			t.Fatal(err)
		}
		st, err := v.PartitionStorage(tp.ID, int32(p))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "due=%t start=%d stored=%d/%d\n", due, start, st.Bytes, st.Entries)
	case "txns-due":
		// At the proposer's clock, as the agent's sweeper asks: the
		// log clock only moves when an entry applies.
		due, err := v.TxnsDue(s.now)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range due {
			fmt.Fprintln(&b, id)
		}
	default:
		d.Fatalf(t, "unknown view %q", what)
	}
	if b.Len() == 0 {
		return "none\n"
	}
	return b.String()
}

func renderQuotaName(n QuotaName) string {
	switch n.Kind {
	case QuotaAbsent:
		return "-"
	case QuotaDefault:
		return "<default>"
	}
	return fmt.Sprintf("%q", n.Name)
}
