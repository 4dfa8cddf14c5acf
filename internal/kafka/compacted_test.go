package kafka

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// A compacted topic refuses a batch holding a record without a key, as
// Kafka does: INVALID_RECORD, and from v8 one ErrorRecords entry per
// keyless record with Kafka's message; compressed batches are looked
// into. A topic that only deletes takes such records.
func TestProduceKeylessToCompactedTopic(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	a.createTopic(t, "table", 1, map[string]*string{"cleanup.policy": sp("compact")})
	a.createTopic(t, "both", 1, map[string]*string{"cleanup.policy": sp("compact,delete")})
	a.createTopic(t, "log", 1, nil)
	keyed := func(c recordbatch.Compression) []byte {
		return batchtest.Build(t, batchtest.Options{Records: 3, KeyBytes: 4, ValueBytes: 10, Compression: c})
	}
	keyless := func(c recordbatch.Compression) []byte {
		return batchtest.Build(t, batchtest.Options{Records: 3, ValueBytes: 10, Compression: c})
	}
	const invalidRecord = 87
	tests := []struct {
		name     string
		version  int16
		part     rawPart
		want     int16
		wantErrs int // ErrorRecords entries
	}{
		{"keyed", 9, rawPart{"table", 0, keyed(recordbatch.CompressionNone)}, 0, 0},
		{"keyed zstd", 9, rawPart{"table", 0, keyed(recordbatch.CompressionZstd)}, 0, 0},
		{"keyless", 9, rawPart{"table", 0, keyless(recordbatch.CompressionNone)}, invalidRecord, 3},
		{"keyless lz4", 9, rawPart{"table", 0, keyless(recordbatch.CompressionLZ4)}, invalidRecord, 3},
		{"keyless gzip, compact and delete", 9, rawPart{"both", 0, keyless(recordbatch.CompressionGzip)}, invalidRecord, 3},
		{"keyless v7: no record errors", 7, rawPart{"table", 0, keyless(recordbatch.CompressionSnappy)}, invalidRecord, 0},
		{"keyless to a delete topic", 9, rawPart{"log", 0, keyless(recordbatch.CompressionNone)}, 0, 0},
	}
	c := dial(t, a.addr)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := roundTrip(t, c, int32(i), produceReq(tt.version, -1, nil, tt.part)).(*kmsg.ProduceResponse)
			sp := producePartitions(resp)[0]
			if sp.ErrorCode != tt.want || len(sp.ErrorRecords) != tt.wantErrs {
				t.Fatalf("code %d with %d record errors, want %d with %d", sp.ErrorCode, len(sp.ErrorRecords), tt.want, tt.wantErrs)
			}
			for j, er := range sp.ErrorRecords {
				if er.RelativeOffset != int32(j) || er.ErrorMessage == nil ||
					*er.ErrorMessage != "Compacted topic cannot accept message without key in topic partition "+tt.part.topic+"-0." {
					t.Fatalf("record error %d: %d %v", j, er.RelativeOffset, er.ErrorMessage)
				}
			}
			if tt.want != 0 && tt.version >= 8 && (sp.ErrorMessage == nil || !strings.Contains(*sp.ErrorMessage, "3 record errors")) {
				t.Fatalf("message %v", sp.ErrorMessage)
			}
		})
	}

	// A franz-go producer sees INVALID_RECORD, and keyed records go in.
	cl := a.kgoClient(t, kgo.DefaultProduceTopic("table"), kgo.RecordRetries(1))
	err := cl.ProduceSync(a.ctx(t), &kgo.Record{Value: []byte("v")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless: %v, want INVALID_RECORD", err)
	}
	if err := cl.ProduceSync(a.ctx(t), &kgo.Record{Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("keyed: %v", err)
	}
}

// min.compaction.lag.ms above max.compaction.lag.ms is INVALID_CONFIG,
// as Kafka's LogConfig.validateValues has it, through CreateTopics,
// AlterConfigs and IncrementalAlterConfigs (against the topic's configs
// after the change).
func TestCompactionLagConflict(t *testing.T) {
	a := newTestAgent(t)
	ctx := a.ctx(t)
	resp, err := a.Admin.CreateTopic(ctx, 1, -1, map[string]*string{"min.compaction.lag.ms": sp("10"), "max.compaction.lag.ms": sp("5")}, "bad")
	if !errors.Is(resp.Err, kerr.InvalidConfig) || !strings.Contains(resp.ErrMessage, "min.compaction.lag.ms (10) > max.compaction.lag.ms (5)") {
		t.Fatalf("create: %v %v %q", err, resp.Err, resp.ErrMessage)
	}
	a.createTopic(t, "lags", 1, map[string]*string{"max.compaction.lag.ms": sp("100")})
	set := func(name, v string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: &v}
	}
	check := func(what string, rs kadm.AlterConfigsResponses, err error, want error) {
		t.Helper()
		if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, want) || (want == nil) != (rs[0].Err == nil) {
			t.Fatalf("%s: %v %+v, want %v", what, err, rs, want)
		}
	}
	rs, err := a.Admin.AlterTopicConfigs(ctx, []kadm.AlterConfig{set("min.compaction.lag.ms", "200")}, "lags")
	check("incremental above the stored max", rs, err, kerr.InvalidConfig)
	rs, err = a.Admin.AlterTopicConfigs(ctx, []kadm.AlterConfig{set("min.compaction.lag.ms", "50")}, "lags")
	check("incremental below it", rs, err, nil)
	rs, err = a.Admin.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "max.compaction.lag.ms"}}, "lags")
	check("deleting the max (default: no limit)", rs, err, nil)
	rs, err = a.Admin.AlterTopicConfigsState(ctx, []kadm.AlterConfig{set("min.compaction.lag.ms", "9"), set("max.compaction.lag.ms", "8")}, "lags")
	check("whole alter", rs, err, kerr.InvalidConfig)
	rs, err = a.Admin.AlterTopicConfigsState(ctx, []kadm.AlterConfig{set("min.compaction.lag.ms", "9")}, "lags")
	check("whole alter, the max back to its default", rs, err, nil)
}
