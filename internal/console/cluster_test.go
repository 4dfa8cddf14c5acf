package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// On a cluster of two agents, one agent's console shows every
// partition's stored size (each agent reports the partitions it leads)
// and the lag of a group the other agent coordinates.
func TestConsoleTwoAgents(t *testing.T) {
	// A file log takes one agent at a time; PostgreSQL takes several.
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("log", fmt.Sprintf("console-%d", time.Now().UnixNano()))
	u.RawQuery = q.Encode()
	objects := "file://" + filepath.ToSlash(t.TempDir())
	cfg := func(node int32) agent.Config {
		return agent.Config{KafkaListen: "127.0.0.1:0", NodeID: node, ObjStore: objects, Log: u.String()}
	}
	a := startAgentWith(t, cfg(1))
	startAgentWith(t, cfg(2))
	cl := kafkaClient(t, a, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	createTopic(t, adm, 4, "spread")
	for p := range int32(4) {
		produce(t, cl, &kgo.Record{Topic: "spread", Partition: p, Value: []byte("some bytes")})
	}

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	tds, err := adm.ListTopics(kadm.WithAuthorizedOps(ctx), "spread")
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]bool{}
	for _, p := range tds["spread"].Partitions {
		leaders[p.Leader] = true
	}
	if !leaders[1] || !leaders[2] {
		t.Fatalf("partition leaders %v: want both agents", leaders)
	}
	_, body := get(t, a, "/console/topics/spread")
	if n := strings.Count(body, `<td class="n">0 B</td>`); n != 0 {
		t.Errorf("%d partitions show no stored bytes", n)
	}
	if !strings.Contains(body, "4 records") {
		t.Error("the topic page does not count 4 records")
	}

	// A group agent 2 coordinates.
	group := ""
	for i := 0; group == ""; i++ {
		g := fmt.Sprint("g", i)
		cs := adm.FindGroupCoordinators(ctx, g)
		if c, ok := cs[g]; ok && c.Err == nil && c.NodeID == 2 {
			group = g
		}
		if i == 100 {
			t.Fatal("no group of the first 100 is coordinated by agent 2")
		}
	}
	res, err := adm.CommitOffsets(ctx, group, kadm.Offsets{"spread": {0: {Topic: "spread", Partition: 0, At: 0, LeaderEpoch: -1}}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("commit for %s: %v", group, err)
	}
	// Partition 0 committed at 0, the other three without a commit: kadm
	// counts each partition's whole log, one record each.
	code, body := get(t, a, "/console/groups/"+group)
	if code != http.StatusOK || !strings.Contains(body, `id="total-lag">4<`) || !strings.Contains(body, "coordinator node 2") {
		t.Errorf("group %s on agent 1's console: status %d, want lag 4 and coordinator node 2", group, code)
	}
}
