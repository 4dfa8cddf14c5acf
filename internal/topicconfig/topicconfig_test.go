package topicconfig

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestSchema(t *testing.T) {
	ks := Keys()
	if !slices.IsSortedFunc(ks, func(a, b Key) int { return strings.Compare(a.Name, b.Name) }) {
		t.Fatal("keys are not sorted by name: Lookup would miss some")
	}
	for i, k := range ks {
		if i > 0 && ks[i-1].Name == k.Name {
			t.Errorf("%s listed twice", k.Name)
		}
		if err := k.Validate(k.Default); err != nil {
			t.Errorf("default of %s does not validate: %v", k.Name, err)
		}
		if got, ok := Lookup(k.Name); !ok || got.Name != k.Name {
			t.Errorf("Lookup(%q) = %q, %v", k.Name, got.Name, ok)
		}
		if k.Doc == "" {
			t.Errorf("%s has no doc", k.Name)
		}
	}
	if _, ok := Lookup("no.such.config"); ok {
		t.Error("Lookup found an unknown name")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name, value string
		want        error
	}{
		{"retention.ms", "1000", nil},
		{"retention.ms", "-1", nil},
		{"retention.ms", " 60000 ", nil}, // Kafka trims numbers
		{"retention.ms", "-2", ErrInvalid},
		{"retention.ms", "1h", ErrInvalid},
		{"retention.ms", "", ErrInvalid},
		{"retention.bytes", "-5", nil}, // no range in Kafka either
		{"retention.bytes", "9223372036854775808", ErrInvalid},
		{"max.message.bytes", "2147483647", nil},
		{"max.message.bytes", "2147483648", ErrInvalid}, // an int, not a long
		{"max.message.bytes", "-1", ErrInvalid},
		{"cleanup.policy", "compact", nil},
		{"cleanup.policy", "compact,delete", nil},
		{"cleanup.policy", "delete, compact", nil},
		{"cleanup.policy", "", ErrInvalid},
		{"cleanup.policy", "compact,", ErrInvalid},
		{"cleanup.policy", "archive", ErrInvalid},
		{"message.timestamp.type", "LogAppendTime", nil},
		{"message.timestamp.type", "logappendtime", ErrInvalid},
		{"compression.type", "zstd", nil},
		{"compression.type", "brotli", ErrInvalid},
		{"compression.gzip.level", "-1", nil},
		{"compression.gzip.level", "0", ErrInvalid},
		{"min.cleanable.dirty.ratio", "0.25", nil},
		{"min.cleanable.dirty.ratio", "1.5", ErrInvalid},
		{"min.cleanable.dirty.ratio", "NaN", ErrInvalid},
		{"preallocate", "TRUE", nil},
		{"preallocate", "yes", ErrInvalid},
		{"min.insync.replicas", "0", ErrInvalid},
		{"segment.bytes", "13", ErrInvalid},
		{"leader.replication.throttled.replicas", "*", nil},
		{"leader.replication.throttled.replicas", "0:1, 1:2", nil},
		{"leader.replication.throttled.replicas", "0-1", ErrInvalid},
		{"no.such.config", "1", ErrUnknown},
		{"message.format.version", "2.8", ErrUnknown}, // removed in Kafka 4.0
		{"confluent.value.schema.validation", "true", nil},
		{"confluent.key.schema.validation", "on", ErrInvalid},
		{"confluent.value.subject.name.strategy", "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy", nil},
		{"confluent.key.subject.name.strategy", "io.confluent.kafka.serializers.subject.RecordNameStrategy", nil},
		{"confluent.value.subject.name.strategy", "RecordNameStrategy", ErrInvalid}, // the class name, in full
		{"confluent.value.subject.name.strategy", "com.example.MyStrategy", ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			err := Validate(tt.name, tt.value)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Validate = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestValidateAllReportsFirstByName(t *testing.T) {
	m := map[string]string{"zzz.unknown": "1", "retention.ms": "x", "cleanup.policy": "compact"}
	for range 10 { // map order must not change the answer
		err := ValidateAll(m)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "retention.ms") {
			t.Fatalf("ValidateAll = %v, want retention.ms invalid", err)
		}
	}
	if err := ValidateAll(map[string]string{"retention.ms": "5"}); err != nil {
		t.Fatal(err)
	}
}

func TestEffective(t *testing.T) {
	d := Defaults()
	if d.MaxMessageBytes != 1048588 || d.RetentionMs != 604800000 || d.RetentionBytes != -1 ||
		d.CleanupPolicy != (CleanupPolicy{Delete: true}) || d.MessageTimestampType != CreateTime ||
		d.CompressionType != "producer" || d.MinInsyncReplicas != 1 || d.MinCleanableDirtyRatio != 0.5 {
		t.Fatalf("defaults %+v", d)
	}
	if Effective(nil) != d {
		t.Fatal("Effective(nil) differs from Defaults")
	}
	c := Effective(map[string]string{
		"max.message.bytes":      "2000000",
		"retention.ms":           "-1",
		"cleanup.policy":         "compact,delete",
		"message.timestamp.type": "LogAppendTime",
		"segment.bytes":          "bogus", // ignored: the default stays
		"some.future.config":     "1",     // ignored
	})
	want := d
	want.MaxMessageBytes = 2000000
	want.RetentionMs = -1
	want.CleanupPolicy = CleanupPolicy{Delete: true, Compact: true}
	want.MessageTimestampType = LogAppendTime
	if c != want {
		t.Fatalf("Effective = %+v\nwant %+v", c, want)
	}
	if got := Effective(map[string]string{"cleanup.policy": "compact"}).CleanupPolicy; got != (CleanupPolicy{Compact: true}) {
		t.Fatalf("compact alone: %+v", got)
	}
}

func TestSchemaValidationConfigs(t *testing.T) {
	d := Defaults()
	if d.KeySchemaValidation || d.ValueSchemaValidation || d.KeySubjectNameStrategy != TopicNameStrategy || d.ValueSubjectNameStrategy != TopicNameStrategy {
		t.Fatalf("defaults %+v: validation must be off, TopicNameStrategy", d)
	}
	c := Effective(map[string]string{
		"confluent.key.schema.validation":       "TRUE",
		"confluent.value.schema.validation":     "false",
		"confluent.key.subject.name.strategy":   "io.confluent.kafka.serializers.subject.RecordNameStrategy",
		"confluent.value.subject.name.strategy": "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
	})
	if !c.KeySchemaValidation || c.ValueSchemaValidation || c.KeySubjectNameStrategy != RecordNameStrategy || c.ValueSubjectNameStrategy != TopicRecordNameStrategy {
		t.Fatalf("Effective = %+v", c)
	}
	err := Validate("confluent.value.subject.name.strategy", "x.Y")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy") {
		t.Fatalf("a foreign strategy: %v, want ErrInvalid naming the accepted classes", err)
	}
	for _, s := range []SubjectNameStrategy{TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy} {
		if err := Validate("confluent.key.subject.name.strategy", s.ClassName()); err != nil {
			t.Errorf("%v: %v", s, err)
		}
	}
}

func TestValue(t *testing.T) {
	m := map[string]string{"retention.ms": "5"}
	if v, set := Value(m, "retention.ms"); v != "5" || !set {
		t.Fatalf("Value = %q, %v", v, set)
	}
	if v, set := Value(m, "cleanup.policy"); v != "delete" || set {
		t.Fatalf("Value of unset = %q, %v", v, set)
	}
}

func TestLists(t *testing.T) {
	tests := []struct {
		op, cur, arg, want string
	}{
		{"append", "delete", "compact", "delete,compact"},
		{"append", "delete", "delete", "delete"},
		{"append", "", "compact", "compact"},
		{"append", "a, b", "c,a", "a,b,c"},
		{"subtract", "delete,compact", "delete", "compact"},
		{"subtract", "delete", "delete", ""},
		{"subtract", "a,b,a", "a", "b"},
		{"subtract", "a", "z", "a"},
	}
	for _, tt := range tests {
		t.Run(tt.op+" "+tt.cur+" "+tt.arg, func(t *testing.T) {
			var got string
			if tt.op == "append" {
				got = AppendList(tt.cur, tt.arg)
			} else {
				got = SubtractList(tt.cur, tt.arg)
			}
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidateCombination(t *testing.T) {
	for _, tc := range []struct {
		m    map[string]string
		want error
	}{
		{nil, nil},
		{map[string]string{"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "5"}, nil},
		{map[string]string{"min.compaction.lag.ms": "6", "max.compaction.lag.ms": "5"}, ErrInvalid},
		{map[string]string{"max.compaction.lag.ms": "1"}, nil},                   // min defaults to 0
		{map[string]string{"min.compaction.lag.ms": "9223372036854775807"}, nil}, // max defaults to Long.MAX
	} {
		if err := ValidateCombination(tc.m); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%v: %v, want %v", tc.m, err, tc.want)
		}
	}
}
