package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/testservers/testproc"
	"github.com/strandkafka/strand/internal/testservers/zktest"
)

// ZooKeeperEnv names a ZooKeeper (host:port) for burrow, which needs one
// for its own coordination. Without it the cell starts its own
// (testservers/zktest, Debian's zookeeper package), and reports burrow
// missing when that cannot run.
const ZooKeeperEnv = "STRAND_COMPAT_ZOOKEEPER"

// burrowRecommitInterval is how often the cell commits the group's
// offset again while it waits, as a consumer committing on a timer
// would: burrow drops a commit it reads before its cluster module has
// learned the partition, so the first record alone may go unseen.
const burrowRecommitInterval = 2 * time.Second

// burrowPollInterval is how often burrow's lag endpoint is asked; burrow
// has no way to announce that it evaluated a group.
const burrowPollInterval = 500 * time.Millisecond

// burrowConfig is burrow 1.2's TOML: one cluster and consumer module on
// the agent, in-memory storage, HTTP on loopback, logs to stdout.
const burrowConfig = `[general]
pidfile="%[1]s/burrow.pid"
[logging]
level="info"
[zookeeper]
servers=["%[2]s"]
timeout=3
root-path="/strand-compat-burrow"
[client-profile.strand]
client-id="strand-compat-burrow"
kafka-version="2.0.0"
[cluster.strand]
class-name="kafka"
servers=["%[3]s"]
client-profile="strand"
topic-refresh=2
offset-refresh=1
[consumer.strand]
class-name="kafka"
cluster="strand"
servers=["%[3]s"]
client-profile="strand"
start-latest=false
[httpserver.default]
address="%[4]s"
[storage.default]
class-name="inmemory"
workers=2
intervals=10
min-distance=1
`

// runBurrow commits a known lag for a group (half of a topic's records)
// and asks burrow for that group's total lag.
func runBurrow(ctx context.Context, env Env) (row Row) {
	start := time.Now()
	row.Client = "burrow"
	defer func() { row.Elapsed = time.Since(start) }()
	bin, err := exec.LookPath("Burrow")
	if err != nil {
		bin, err = exec.LookPath("burrow")
	}
	if err != nil {
		row.missing([]Capability{Lag}, fmt.Errorf("%w: Burrow not in PATH (Debian: apt-get install burrow)", ErrClientMissing))
		return row
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "burrow").Output(); err == nil {
		row.Version = string(out)
	}

	topic, group := env.Prefix+"-burrow", env.Prefix+"-burrow-g"
	produced, committed := int64(env.Records), int64(env.Records/2)
	if err := setUpLag(ctx, env, topic, group, produced, committed); err != nil {
		row.set(Lag, Cell{Status: Fail, Detail: "setting up the group: " + err.Error()})
		return row
	}
	want := produced - committed

	dir, err := os.MkdirTemp("", "strand-compat-burrow-")
	if err != nil {
		row.set(Lag, Cell{Status: Fail, Detail: err.Error()})
		return row
	}
	defer os.RemoveAll(dir)
	zk := os.Getenv(ZooKeeperEnv)
	if zk == "" {
		srv, err := zktest.Start()
		if errors.Is(err, testproc.ErrNoBinary) {
			row.missing([]Capability{Lag}, fmt.Errorf("%w: burrow needs ZooKeeper: %v", ErrClientMissing, err))
			return row
		}
		if err != nil {
			row.set(Lag, Cell{Status: Fail, Detail: "starting ZooKeeper for burrow: " + err.Error()})
			return row
		}
		defer srv.Stop()
		zk = srv.Addr()
	}
	httpAddr, err := closedPort()
	if err != nil {
		row.set(Lag, Cell{Status: Fail, Detail: err.Error()})
		return row
	}
	cfg := fmt.Sprintf(burrowConfig, dir, zk, env.Addr, httpAddr)
	if err := os.WriteFile(filepath.Join(dir, "burrow.toml"), []byte(cfg), 0o644); err != nil {
		row.set(Lag, Cell{Status: Fail, Detail: err.Error()})
		return row
	}

	ctx, cancel := context.WithTimeout(ctx, env.StepTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-config-dir", dir)
	ownProcessGroup(cmd)
	logs := newLineTail(200)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		row.set(Lag, Cell{Status: Fail, Detail: err.Error()})
		return row
	}
	go scanLines(pr, logs.add)
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		exited <- err
	}()
	defer func() {
		cancel()
		<-exited
	}()

	url := fmt.Sprintf("http://%s/v3/kafka/strand/consumer/%s/lag", httpAddr, group)
	tick := time.NewTicker(burrowPollInterval)
	defer tick.Stop()
	recommit := time.NewTicker(burrowRecommitInterval)
	defer recommit.Stop()
	last := "no answer yet"
	for {
		select {
		case err := <-exited:
			exited <- err // for the deferred wait
			why := burrowComplaint(logs.String())
			if why == "" {
				why = lastLines(logs.String(), 1)
			}
			row.set(Lag, Cell{Status: Fail, Detail: fmt.Sprintf("burrow exited (%v): %s", err, why)})
			return row
		case <-ctx.Done():
			detail := fmt.Sprintf("burrow did not report a total lag of %d for %s within %v; last answer: %s",
				want, group, env.StepTimeout, last)
			if c := burrowComplaint(logs.String()); c != "" {
				detail += "; burrow's last error: " + c
			}
			row.set(Lag, Cell{Status: Fail, Detail: detail})
			return row
		case <-recommit.C:
			if err := commitOffset(ctx, env, topic, group, committed); err != nil {
				last = "committing again: " + err.Error()
			}
		case <-tick.C:
			lag, answer, err := burrowLag(ctx, url)
			if err != nil {
				last = err.Error()
				continue
			}
			last = answer
			if lag == want {
				row.set(Lag, Cell{Status: Pass, Detail: fmt.Sprintf("burrow reports total lag %d for %s (%d produced, %d committed)", lag, group, produced, committed)})
				return row
			}
		}
	}
}

// setUpLag produces n records to a new one-partition topic and commits
// offset committed for group.
func setUpLag(ctx context.Context, env Env, topic, group string, n, committed int64) error {
	ctx, cancel := context.WithTimeout(ctx, env.StepTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Value: fmt.Appendf(nil, "lag-%06d", i)}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	return commitOffset(ctx, env, topic, group, committed)
}

// commitOffset commits offset for group's partition 0 of topic.
func commitOffset(ctx context.Context, env Env, topic, group string, offset int64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: offset, LeaderEpoch: -1})
	cr, err := kadm.NewClient(cl).CommitOffsets(ctx, group, offs)
	if err == nil {
		err = cr.Error()
	}
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// burrowLag asks burrow for a group's total lag.
func burrowLag(ctx context.Context, url string) (int64, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, "", err
	}
	answer := fmt.Sprintf("HTTP %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	if len(answer) > 200 {
		answer = answer[:200] + "..."
	}
	var r struct {
		Error  bool `json:"error"`
		Status struct {
			TotalLag int64 `json:"totallag"`
		} `json:"status"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Error {
		return 0, answer, errors.New(answer)
	}
	return r.Status.TotalLag, answer, nil
}

// burrowMsgRE pulls the message and error out of burrow's JSON log lines.
var burrowMsgRE = regexp.MustCompile(`"level":"(error|panic|fatal)".*?"msg":"([^"]*)"(?:.*?"error":"([^"]*)")?`)

// burrowComplaint is burrow's last error-level log message, or "".
func burrowComplaint(logs string) string {
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if m := burrowMsgRE.FindStringSubmatch(lines[i]); m != nil {
			if m[3] != "" {
				return m[2] + ": " + m[3]
			}
			return m[2]
		}
	}
	return ""
}

// closedPort returns a loopback address whose port was free a moment
// ago.
func closedPort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
