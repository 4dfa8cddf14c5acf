package cli

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// decodeOutput runs a command with --format and decodes what it printed.
func decodeOutput[T any](t *testing.T, brokers, format string, args ...string) T {
	t.Helper()
	r := mustRun(t, brokers, "", append(args, "--format", format)...)
	var v T
	var err error
	if format == OutputYAML {
		err = yaml.Unmarshal([]byte(r.stdout), &v)
	} else {
		err = json.Unmarshal([]byte(r.stdout), &v)
	}
	if err != nil {
		t.Fatalf("strand %s --format %s: %v\n%s", strings.Join(args, " "), format, err, r.stdout)
	}
	return v
}

// TestOutputFormats runs each Kafka-side list and describe command with
// --format json and yaml against a fake cluster and checks what it
// printed against the cluster as an independent client sees it.
func TestOutputFormats(t *testing.T) {
	f := newGroupFixture(t) // topic t with records, and a fake cluster
	_, stop := f.startConsumer(t, "g")
	stop()
	mustRun(t, f.brokers, "", "topic", "create", "empty", "-p", "2", "-c", "retention.ms=3600000")
	mustRun(t, f.brokers, "", "acl", "create", "--allow-principal", "User:alice", "--operation", "read", "--topic", "orders")
	mustRun(t, f.brokers, "", "quota", "alter", "--user", "<default>", "--set", "consumer_byte_rate=2048")
	ctx := t.Context()

	for _, format := range []string{OutputJSON, OutputYAML} {
		t.Run(format, func(t *testing.T) {
			listing := decodeOutput[[]TopicListing](t, f.brokers, format, "topic", "list")
			details, err := f.adm.ListTopics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, l := range listing {
				names = append(names, l.Name)
				if d := details[l.Name]; l.Partitions != len(d.Partitions) || l.SizeBytes == nil || l.Error != "" {
					t.Errorf("topic list: %+v, want %d partitions and a size", l, len(d.Partitions))
				}
			}
			if want := details.Names(); !slices.Equal(names, want) {
				t.Errorf("topic list names %v, want %v", names, want)
			}

			descs := decodeOutput[[]TopicDescription](t, f.brokers, format, "topic", "describe", fixtureTopic, "empty")
			ends, err := f.adm.ListEndOffsets(ctx, fixtureTopic)
			if err != nil {
				t.Fatal(err)
			}
			// Kafka's tools print a Uuid as URL-safe base64 without
			// padding: 22 characters, no '=', '-' and '_' for '+' and '/'.
			id := details[fixtureTopic].ID
			if len(descs) != 2 || descs[0].Name != fixtureTopic || descs[1].Name != "empty" || descs[0].ID != base64.RawURLEncoding.EncodeToString(id[:]) ||
				len(descs[0].ID) != 22 {
				t.Fatalf("topic describe: %s, want id %s", mustJSON(descs), base64.RawURLEncoding.EncodeToString(id[:]))
			}
			for _, p := range descs[0].Partitions {
				end, _ := ends.Lookup(fixtureTopic, p.Partition)
				if p.EndOffset == nil || *p.EndOffset != end.Offset || p.StartOffset == nil || *p.StartOffset != 0 {
					t.Errorf("topic describe %s/%d: %s, want end %d", fixtureTopic, p.Partition, mustJSON(p), end.Offset)
				}
			}
			i := slices.IndexFunc(descs[1].Configs, func(c TopicConfig) bool { return c.Name == "retention.ms" })
			if len(descs[1].Partitions) != 2 || i < 0 || descs[1].Configs[i].Value == nil || *descs[1].Configs[i].Value != "3600000" ||
				descs[1].Configs[i].Source != "DYNAMIC_TOPIC_CONFIG" {
				t.Errorf("topic describe empty: %s", mustJSON(descs[1]))
			}

			groups := decodeOutput[[]GroupListing](t, f.brokers, format, "group", "list")
			if len(groups) != 1 || groups[0].Group != "g" || groups[0].State != "Empty" || groups[0].ProtocolType != "consumer" {
				t.Errorf("group list: %s", mustJSON(groups))
			}
			described := decodeOutput[[]JSONGroup](t, f.brokers, format, "group", "describe", "g")
			// The lag of the partitions with a commit: 2 and 2 (partition 2
			// has none, so no lag to count).
			if len(described) != 1 || described[0].TotalLag != 4 || len(described[0].Partitions) != len(fixtureRecords) {
				t.Errorf("group describe: %s, want total lag 4", mustJSON(described))
			}

			acls := decodeOutput[[]ACLListing](t, f.brokers, format, "acl", "list")
			want := []ACLListing{{Principal: "User:alice", Host: "*", ResourceType: "TOPIC", ResourceName: "orders",
				PatternType: "LITERAL", Operation: "READ", Permission: "ALLOW"}}
			if !slices.Equal(acls, want) {
				t.Errorf("acl list: %s, want %s", mustJSON(acls), mustJSON(want))
			}

			quotas := decodeOutput[[]QuotaListing](t, f.brokers, format, "quota", "describe")
			if len(quotas) != 1 || len(quotas[0].Entity) != 1 || quotas[0].Entity[0] != (QuotaEntityPart{Type: "user"}) ||
				!slices.Equal(quotas[0].Values, []QuotaValue{{Key: "consumer_byte_rate", Value: 2048}}) {
				t.Errorf("quota describe: %s", mustJSON(quotas))
			}
		})
	}
}

// TestOutputFormatUsage: an unknown --format is a usage error on every
// command that has one, before anything is sent (nothing listens here).
func TestOutputFormatUsage(t *testing.T) {
	for _, args := range [][]string{
		{"topic", "list"}, {"topic", "describe", "t"}, {"group", "list"}, {"group", "describe", "g"},
		{"acl", "list"}, {"acl", "delete", "--topic", "t"}, {"quota", "describe"}, {"user", "list"}, {"features", "describe"},
	} {
		r := run(t, "127.0.0.1:1", "", append(args, "--format", "xml", "--timeout", "1ms")...)
		if !errors.Is(r.err, ErrUsage) {
			t.Errorf("strand %s --format xml: %v, want a usage error", strings.Join(args, " "), r.err)
		}
	}
}
