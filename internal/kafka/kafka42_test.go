package kafka

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// notServed lists every API key, or versions of one, that a Kafka 4.2
// broker serves (kversion.V4_2_0: its broker keys) and Strand does not,
// with why. served is the highest version Strand serves, -1 for none.
// TestKafka42Coverage fails for a missing key or version without an
// entry, and for an entry that is stale because Strand now serves more:
// serving a new version means deleting or updating its line here.
var notServed = map[int16]struct {
	served int16
	reason string
}{
	15: {5, "DescribeGroups v6 (KIP-1043: an ErrorMessage per group) is not built yet; v5 describes every group type, share groups included"},
	27: {-1, "WriteTxnMarkers is inter-broker: the transaction coordinator writes markers itself, through the replicated metadata"},
	34: {-1, "AlterReplicaLogDirs moves replicas between a broker's disks; an agent's data is in the object store, with no log dirs to move between"},
	38: {-1, "delegation tokens (KIP-48) are not implemented; SASL/SCRAM, PLAIN and mTLS authenticate clients"},
	39: {-1, "delegation tokens (KIP-48) are not implemented; SASL/SCRAM, PLAIN and mTLS authenticate clients"},
	40: {-1, "delegation tokens (KIP-48) are not implemented; SASL/SCRAM, PLAIN and mTLS authenticate clients"},
	41: {-1, "delegation tokens (KIP-48) are not implemented; SASL/SCRAM, PLAIN and mTLS authenticate clients"},
	55: {-1, "DescribeQuorum describes the KRaft quorum; Strand's metadata log is the shared log, with no voters"},
	64: {-1, "UnregisterBroker removes a KRaft broker registration; an agent leaves the cluster when its lease expires"},
	80: {-1, "AddRaftVoter changes the KRaft quorum; Strand has none"},
	81: {-1, "RemoveRaftVoter changes the KRaft quorum; Strand has none"},
	83: {-1, "share-group state RPCs are inter-broker (broker to share coordinator); Strand keeps that state in the replicated metadata"},
	84: {-1, "share-group state RPCs are inter-broker (broker to share coordinator); Strand keeps that state in the replicated metadata"},
	85: {-1, "share-group state RPCs are inter-broker (broker to share coordinator); Strand keeps that state in the replicated metadata"},
	86: {-1, "share-group state RPCs are inter-broker (broker to share coordinator); Strand keeps that state in the replicated metadata"},
	87: {-1, "share-group state RPCs are inter-broker (broker to share coordinator); Strand keeps that state in the replicated metadata"},
	88: {-1, "streams groups (KIP-1071, StreamsGroupHeartbeat) are not built; Kafka Streams uses classic groups against Strand"},
	89: {-1, "streams groups (KIP-1071, StreamsGroupDescribe) are not built; Kafka Streams uses classic groups against Strand"},
}

// TestKafka42Coverage compares what ApiVersions serves with what a Kafka
// 4.2 broker serves, key by key.
func TestKafka42Coverage(t *testing.T) {
	served := map[int16]int16{}
	for _, k := range DefaultRegistry().APIVersions() {
		served[k.ApiKey] = k.MaxVersion
	}
	kafka := kversion.V4_2_0()
	kafka.EachMaxKeyVersion(func(key, kafkaMax int16) {
		got, ok := served[key]
		if !ok {
			got = -1
		}
		entry, listed := notServed[key]
		switch {
		case got >= kafkaMax && listed:
			t.Errorf("key %d (%s): Strand serves v%d, Kafka 4.2's max, but notServed still says %q: delete its line", key, kmsg.NameForKey(key), got, entry.reason)
		case got >= kafkaMax:
		case !listed:
			t.Errorf("key %d (%s): Kafka 4.2 serves up to v%d, Strand %s, and notServed gives no reason", key, kmsg.NameForKey(key), kafkaMax, servedText(got))
		case entry.served != got:
			t.Errorf("key %d (%s): notServed says Strand serves %s, it serves %s: update its line (%q)", key, kmsg.NameForKey(key), servedText(entry.served), servedText(got), entry.reason)
		}
	})
	for key := range notServed {
		if _, ok := kafka.LookupMaxKeyVersion(key); !ok {
			t.Errorf("key %d (%s) is in notServed but not among Kafka 4.2's broker keys", key, kmsg.NameForKey(key))
		}
	}
}

func servedText(v int16) string {
	if v < 0 {
		return "nothing"
	}
	return "up to v" + strconv.Itoa(int(v))
}

var updateProtocolDoc = flag.Bool("update-protocol-doc", false, "rewrite the served-keys table of docs/protocol.md from the registry")

// protocolDoc is the protocol reference, from this package's directory.
const protocolDoc = "../../docs/protocol.md"

// TestProtocolReference checks docs/protocol.md's table of served keys
// against the registry (and Kafka 4.2's versions); -update-protocol-doc
// rewrites it.
func TestProtocolReference(t *testing.T) {
	const begin, end = "| key | API | Strand | Kafka 4.2 |\n", "<!-- end of generated table -->"
	var b strings.Builder
	b.WriteString(begin)
	b.WriteString("| --- | --- | --- | --- |\n")
	kafka := kversion.V4_2_0()
	for _, k := range DefaultRegistry().APIVersions() {
		theirs := "-"
		if v, ok := kafka.LookupMaxKeyVersion(k.ApiKey); ok {
			theirs = fmt.Sprintf("v%d", v)
		}
		fmt.Fprintf(&b, "| %d | %s | v%d-%d | %s |\n", k.ApiKey, kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, theirs)
	}
	raw, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s: no generated table between %q and %q", protocolDoc, begin, end)
	}
	if got, want := doc[i:j], b.String(); got != want {
		if *updateProtocolDoc {
			if err := os.WriteFile(protocolDoc, []byte(doc[:i]+want+doc[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s's table of served keys is stale: run go test ./internal/kafka -run TestProtocolReference -update-protocol-doc", protocolDoc)
	}
}
