package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Timing of the group tests.
const (
	// groupSession is the members' session timeout: the coordinator's
	// smallest (group.min.session.timeout.ms), so a killed member costs
	// as little as it can.
	groupSession = 6 * time.Second
	// groupHeartbeat is the members' heartbeat interval: a member
	// hears of a rebalance at its next heartbeat.
	groupHeartbeat = 500 * time.Millisecond
	// groupRebalanceSlack bounds a rebalance after the coordinator
	// knows of its cause: a heartbeat, a JoinGroup and a SyncGroup
	// round per member.
	groupRebalanceSlack = 5 * time.Second
	// groupPollInterval is how often a wait re-reads a group's state
	// from the agent: state in another process has no notification to
	// wait on.
	groupPollInterval = 50 * time.Millisecond
	// groupFetchMaxWait keeps an idle member's fetch short, so it sees
	// new records and rebalances quickly.
	groupFetchMaxWait = 100 * time.Millisecond
)

// groupAgent is `strand serve` as a child process on fixed ports, so a
// test can kill -9 it and restart it where its clients left it.
type groupAgent struct {
	addr     string
	httpAddr string
	args     []string
	proc     *agentProcess
}

func startGroupAgent(t *testing.T) *groupAgent {
	t.Helper()
	a := &groupAgent{addr: freeAddr(t), httpAddr: freeAddr(t)}
	a.args = []string{"--data-dir", t.TempDir(), "--kafka-listen", a.addr, "--http-listen", a.httpAddr}
	a.proc = startProcess(t, a.httpAddr, a.args...)
	return a
}

// crash kills the agent with SIGKILL and starts it again on the same
// data dir and ports.
func (a *groupAgent) crash(t *testing.T) {
	t.Helper()
	a.proc.kill()
	a.proc = startProcess(t, a.httpAddr, a.args...)
}

// partitionRecords is what a partition holds: value by offset.
type partitionRecords map[int32]map[int64]string

func (pr partitionRecords) count() int {
	n := 0
	for _, rs := range pr {
		n += len(rs)
	}
	return n
}

// merge adds other's records to pr.
func (pr partitionRecords) merge(other partitionRecords) {
	for p, rs := range other {
		if pr[p] == nil {
			pr[p] = make(map[int64]string)
		}
		for o, v := range rs {
			pr[p][o] = v
		}
	}
}

// produceSpread produces counts[p] records to partition p of topic,
// valued "<prefix>-<p>-<i>", and returns them at their acknowledged
// offsets. opts add to the producer's options.
func produceSpread(t *testing.T, addr, topic, prefix string, counts map[int32]int, opts ...kgo.Opt) partitionRecords {
	t.Helper()
	cl := newClient(t, addr, append([]kgo.Opt{kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite()}, opts...)...)
	var rs []*kgo.Record
	for p, n := range counts {
		for i := range n {
			rs = append(rs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%s-%d-%04d", prefix, p, i)})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	results := cl.ProduceSync(ctx, rs...)
	if err := results.FirstErr(); err != nil {
		t.Fatalf("produce %s to %s: %v", prefix, topic, err)
	}
	out := make(partitionRecords)
	for _, r := range results {
		if out[r.Record.Partition] == nil {
			out[r.Record.Partition] = make(map[int64]string)
		}
		out[r.Record.Partition][r.Record.Offset] = string(r.Record.Value)
	}
	return out
}

// evenCounts is n records for each of partitions.
func evenCounts(partitions int32, n int) map[int32]int {
	out := make(map[int32]int, partitions)
	for p := range partitions {
		out[p] = n
	}
	return out
}

// delivered is a record a group member handed to its application.
type delivered struct {
	member    string
	partition int32
	offset    int64
	value     string
}

// deliveryLog collects what the members of a group deliver, in arrival
// order, and wakes a test waiting for a condition on it.
type deliveryLog struct {
	mu struct {
		sync.Mutex
		seen []delivered
		errs []string
		// changed is closed and replaced on every add.
		changed chan struct{}
	}
}

func newDeliveryLog() *deliveryLog {
	l := new(deliveryLog)
	l.mu.changed = make(chan struct{})
	return l
}

func (l *deliveryLog) add(d delivered) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.seen = append(l.mu.seen, d)
	close(l.mu.changed)
	l.mu.changed = make(chan struct{})
}

// addErr records a problem a member reported; the test fails on it at
// the end (checkErrs).
func (l *deliveryLog) addErr(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.mu.errs) < 20 {
		l.mu.errs = append(l.mu.errs, fmt.Sprintf(format, args...))
	}
}

// mark is the position of the next delivery.
func (l *deliveryLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.mu.seen)
}

// since returns the deliveries from mark on.
func (l *deliveryLog) since(mark int) []delivered {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.mu.seen[mark:])
}

// waitCovers waits until every record of want was delivered at least
// once, and fails the test after timeout.
func (l *deliveryLog) waitCovers(t *testing.T, want partitionRecords, timeout time.Duration, what string) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		missing := want.count()
		got := make(map[int32]map[int64]bool)
		for _, d := range l.mu.seen {
			if _, ok := want[d.partition][d.offset]; ok && !got[d.partition][d.offset] {
				if got[d.partition] == nil {
					got[d.partition] = make(map[int64]bool)
				}
				got[d.partition][d.offset] = true
				missing--
			}
		}
		changed := l.mu.changed
		l.mu.Unlock()
		if missing == 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s: %d of %d records not delivered after %v", what, missing, want.count(), timeout)
		}
	}
}

// check fails the test on every reported problem and every delivery
// that is not a produced record, and returns how many deliveries were
// repeats (at-least-once delivery allows them around rebalances).
func (l *deliveryLog) check(t *testing.T, produced partitionRecords) (repeats int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.mu.errs {
		t.Error(e)
	}
	seen := make(map[[2]int64]bool)
	bad := 0
	for _, d := range l.mu.seen {
		if want, ok := produced[d.partition][d.offset]; !ok || want != d.value {
			t.Errorf("%s delivered %d/%d = %q, which was never produced there (want %q)", d.member, d.partition, d.offset, d.value, want)
			if bad++; bad >= 10 {
				break
			}
		}
		k := [2]int64{int64(d.partition), d.offset}
		if seen[k] {
			repeats++
		}
		seen[k] = true
	}
	return repeats
}

// groupOwners is a stable group's assignment of one topic: each
// member's partitions, sorted, by client id.
type groupOwners map[string][]int32

// describeOwners describes group; owners is nil unless the group is
// Stable.
func describeOwners(ctx context.Context, adm *kadm.Client, group, topic string) (owners groupOwners, d kadm.DescribedGroup, err error) {
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, d, err
	}
	d, ok := ds[group]
	switch {
	case !ok:
		return nil, d, fmt.Errorf("group %s missing from DescribeGroups", group)
	case d.Err != nil:
		return nil, d, d.Err
	case d.State != "Stable":
		return nil, d, nil
	}
	owners = make(groupOwners)
	for _, m := range d.Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			return nil, d, fmt.Errorf("member %s: assignment is not a consumer's", m.MemberID)
		}
		ps := []int32{}
		for _, at := range a.Topics {
			if at.Topic == topic {
				ps = append(ps, at.Partitions...)
			}
		}
		slices.Sort(ps)
		if _, dup := owners[m.ClientID]; dup {
			return nil, d, fmt.Errorf("two members with client id %s", m.ClientID)
		}
		owners[m.ClientID] = ps
	}
	return owners, d, nil
}

// evenly accepts owners when exactly clients are members, each owns
// `each` partitions, and together they own partitions 0..n-1 once.
func evenly(clients []string, each int, n int32) func(groupOwners) bool {
	return func(o groupOwners) bool {
		if len(o) != len(clients) {
			return false
		}
		var all []int32
		for _, c := range clients {
			ps, ok := o[c]
			if !ok || len(ps) != each {
				return false
			}
			all = append(all, ps...)
		}
		slices.Sort(all)
		for i, p := range all {
			if p != int32(i) {
				return false
			}
		}
		return len(all) == int(n)
	}
}

// waitOwners polls the group until it is Stable with an assignment ok
// accepts, and returns it and how long that took. It fails the test
// after timeout.
func waitOwners(t *testing.T, adm *kadm.Client, group, topic string, timeout time.Duration, what string, ok func(groupOwners) bool) (groupOwners, kadm.DescribedGroup, time.Duration) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(groupPollInterval)
	defer tick.Stop()
	var (
		last    groupOwners
		lastD   kadm.DescribedGroup
		lastErr error
	)
	for {
		owners, d, err := describeOwners(ctx, adm, group, topic)
		if err == nil && owners != nil && ok(owners) {
			return owners, d, time.Since(start)
		}
		if ctx.Err() == nil {
			last, lastD, lastErr = owners, d, err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("%s: not after %v; last seen: state %q, owners %v, err %v", what, timeout, lastD.State, last, lastErr)
		}
	}
}

// committedOffsets fetches group's committed offsets of topic;
// partitions without one are absent.
func committedOffsets(t *testing.T, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	got, err := tryCommittedOffsets(ctx, adm, group, topic)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	return got
}

func tryCommittedOffsets(ctx context.Context, adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	resps, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]int64)
	for p, r := range resps[topic] {
		if r.Err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, r.Err)
		}
		if r.At >= 0 {
			out[p] = r.At
		}
	}
	return out, nil
}

// waitCommitted polls until group's committed offsets of topic are
// want, and fails the test after timeout.
func waitCommitted(t *testing.T, adm *kadm.Client, group, topic string, want map[int32]int64, timeout time.Duration, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(groupPollInterval)
	defer tick.Stop()
	var (
		last    map[int32]int64
		lastErr error
	)
	for {
		got, err := tryCommittedOffsets(ctx, adm, group, topic)
		if err == nil && maps.Equal(got, want) {
			return
		}
		if ctx.Err() == nil {
			last, lastErr = got, err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("%s: committed offsets %v (err %v), want %v after %v", what, last, lastErr, want, timeout)
		}
	}
}

// kcatMember is `kcat -G` (librdkafka's balanced consumer) as a child
// process, its deliveries going to a deliveryLog.
type kcatMember struct {
	id     string
	cmd    *exec.Cmd
	stderr *lockedBuffer
	exited chan struct{}
}

// startKcatMember starts a kcat consumer in group with client id id.
// Offsets are auto-committed: kcat stores each message's offset once it
// has it, and librdkafka commits what is stored every 5 s, when
// partitions are revoked and when it closes. (kcat's -X hands
// auto.commit.interval.ms to the legacy topic property of that name, so
// the group's interval stays at its default.)
func startKcatMember(t *testing.T, kcat, addr, group, topic, id string, log *deliveryLog) *kcatMember {
	t.Helper()
	cmd := exec.Command(kcat, "-b", addr, "-G", group, "-u", "-f", "%p %o %s\n",
		"-X", "client.id="+id,
		"-X", "session.timeout.ms="+strconv.FormatInt(groupSession.Milliseconds(), 10),
		"-X", "heartbeat.interval.ms="+strconv.FormatInt(groupHeartbeat.Milliseconds(), 10),
		"-X", "fetch.wait.max.ms="+strconv.FormatInt(groupFetchMaxWait.Milliseconds(), 10),
		"-X", "auto.offset.reset=earliest",
		topic)
	m := &kcatMember{id: id, cmd: cmd, stderr: new(lockedBuffer), exited: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = m.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kcat %s: %v", id, err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			f := strings.Fields(line)
			var (
				p, o       int64
				err1, err2 error
			)
			if len(f) == 3 {
				p, err1 = strconv.ParseInt(f[0], 10, 32)
				o, err2 = strconv.ParseInt(f[1], 10, 64)
			}
			if len(f) != 3 || err1 != nil || err2 != nil {
				log.addErr("kcat %s printed %q, want \"partition offset value\"", id, line)
				continue
			}
			log.add(delivered{member: id, partition: int32(p), offset: o, value: f[2]})
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		cmd.Wait()
		pw.Close()
		close(m.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-m.exited
		if t.Failed() {
			t.Logf("kcat %s stderr:\n%s", id, m.stderr.String())
		}
	})
	return m
}

// stop sends sig and waits for the process to exit.
func (m *kcatMember) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := m.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal kcat %s: %v", m.id, err)
	}
	select {
	case <-m.exited:
	case <-time.After(opTimeout):
		t.Fatalf("kcat %s still running %v after %v", m.id, opTimeout, sig)
	}
}

// checkStderr fails the test if librdkafka reported an error or a
// protocol problem; kcat prints both as "% ERROR: ..." or with the
// librdkafka facility.
func (m *kcatMember) checkStderr(t *testing.T) {
	t.Helper()
	for line := range strings.Lines(m.stderr.String()) {
		if strings.Contains(line, "ERROR") || strings.Contains(line, "PROTOERR") || strings.Contains(line, "Protocol parse failure") {
			t.Errorf("kcat %s: %s", m.id, strings.TrimSpace(line))
		}
	}
}

// TestGroupKcat runs librdkafka's balanced consumer (kcat -G, eager
// range assignment) in a group of three on a 6-partition topic: each
// member gets two partitions; when one member leaves (SIGTERM: it
// commits and sends LeaveGroup) or dies (SIGKILL: its session times
// out), the other two take its partitions, and nothing committed before
// the member went away is delivered again. Each departure happens with
// every record so far consumed and committed, so after it no record
// produced before it may be delivered at all, while records produced
// right after it, some to the departed member's partitions, must be.
func TestGroupKcat(t *testing.T) {
	kcat := requireCommand(t, "kcat")
	a := startGroupAgent(t)
	const (
		topic        = "kcat-group"
		group        = "kcat-g"
		partitions   = 6
		perPartition = 50
	)
	createTopic(t, a.addr, topic, partitions)
	adm := kadm.NewClient(newClient(t, a.addr))
	log := newDeliveryLog()
	produced := make(partitionRecords)
	batch := 0
	produce := func() partitionRecords {
		batch++
		rs := produceSpread(t, a.addr, topic, fmt.Sprintf("b%d", batch), evenCounts(partitions, perPartition))
		produced.merge(rs)
		return rs
	}
	members := make(map[string]*kcatMember)
	join := func(ids ...string) {
		for _, id := range ids {
			members[id] = startKcatMember(t, kcat, a.addr, group, topic, id, log)
		}
	}
	// settled waits until owners share every partition evenly, have
	// delivered everything produced, and have committed it.
	settled := func(what string, owners ...string) {
		t.Helper()
		_, d, took := waitOwners(t, adm, group, topic, opTimeout, what,
			evenly(owners, partitions/len(owners), partitions))
		t.Logf("%s after %v (protocol %s)", what, took.Round(time.Millisecond), d.Protocol)
		log.waitCovers(t, produced, opTimeout, what+": delivery")
		waitCommitted(t, adm, group, topic, endOffsets(t, a.addr, topic), opTimeout, what+": commit")
	}
	// depart stops victim with sig and checks that survivors take its
	// partitions within takeover, that records produced meanwhile are
	// delivered, and that nothing committed before is delivered again.
	depart := func(victim string, sig syscall.Signal, takeover time.Duration, survivors ...string) {
		t.Helper()
		before := committedOffsets(t, adm, group, topic)
		mark := log.mark()
		start := time.Now()
		members[victim].stop(t, sig)
		stopped := time.Since(start)
		if state := members[victim].cmd.ProcessState; sig == syscall.SIGTERM && !state.Success() {
			t.Errorf("kcat %s after SIGTERM: %v, want a clean exit", victim, state)
		}
		// Some of these land on the victim's partitions, which nobody
		// consumes until the survivors take them.
		after := produce()
		_, _, took := waitOwners(t, adm, group, topic, takeover,
			fmt.Sprintf("%v take the partitions of %s (%v)", survivors, victim, sig),
			evenly(survivors, partitions/len(survivors), partitions))
		t.Logf("%v of %s (exited after %v, %v): %v own all partitions after %v",
			sig, victim, stopped.Round(time.Millisecond), members[victim].cmd.ProcessState, survivors, took.Round(time.Millisecond))
		log.waitCovers(t, after, opTimeout, fmt.Sprintf("after %v of %s", sig, victim))
		again := 0
		for _, d := range log.since(mark) {
			if d.offset >= before[d.partition] {
				continue
			}
			if again++; again <= 5 {
				t.Errorf("%s delivered %d/%d again after %s's %v: the group had committed offset %d before",
					d.member, d.partition, d.offset, victim, sig, before[d.partition])
			}
		}
		if again > 5 {
			t.Errorf("%d records committed before %s's %v delivered again in all", again, victim, sig)
		}
	}

	produce()
	join("kc0", "kc1", "kc2")
	settled("three members with two partitions each", "kc0", "kc1", "kc2")

	// A clean exit must not wait for the session timeout.
	depart("kc2", syscall.SIGTERM, groupSession, "kc0", "kc1")

	join("kc3")
	settled("a new third member gets two partitions", "kc0", "kc1", "kc3")

	// A dead member is noticed when its session times out.
	depart("kc0", syscall.SIGKILL, groupSession+groupRebalanceSlack, "kc1", "kc3")

	// The last member standing commits when it closes and leaves an
	// empty group behind.
	members["kc1"].stop(t, syscall.SIGTERM)
	waitOwners(t, adm, group, topic, groupSession, "kc3 owns everything", evenly([]string{"kc3"}, partitions, partitions))
	last := produce()
	log.waitCovers(t, last, opTimeout, "kc3 alone")
	members["kc3"].stop(t, syscall.SIGTERM)
	waitCommitted(t, adm, group, topic, endOffsets(t, a.addr, topic), opTimeout, "kc3's commit on close")
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_, d, err := describeOwners(ctx, adm, group, topic)
	if err != nil || d.State != "Empty" || len(d.Members) != 0 {
		t.Errorf("group after every member left: state %q, %d members, err %v; want Empty", d.State, len(d.Members), err)
	}

	for _, m := range members {
		m.checkStderr(t)
	}
	repeats := log.check(t, produced)
	t.Logf("%d records produced in %d batches, %d deliveries, %d of them repeats", produced.count(), batch, log.mark(), repeats)
}

// describeRow is one partition row of `strand group describe`.
type describeRow struct {
	current, logEnd, lag string
	member               string
}

// parseDescribe reads the partition table of `strand group describe`'s
// text output for topic, and the summary's TOTAL-LAG.
func parseDescribe(t *testing.T, out, topic string) (rows map[int32]describeRow, totalLag string) {
	t.Helper()
	rows = make(map[int32]describeRow)
	var cols map[string]int
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			cols = nil
		case len(f) == 2 && f[0] == "TOTAL-LAG":
			totalLag = f[1]
		case f[0] == "TOPIC":
			cols = make(map[string]int)
			for i, h := range f {
				cols[h] = i
			}
		case cols != nil && f[0] == topic:
			if len(f) < len(cols) {
				t.Fatalf("describe row %q: %d cells, header has %d", line, len(f), len(cols))
			}
			p, err := strconv.ParseInt(f[cols["PARTITION"]], 10, 32)
			if err != nil {
				t.Fatalf("describe row %q: %v", line, err)
			}
			rows[int32(p)] = describeRow{
				current: f[cols["CURRENT-OFFSET"]],
				logEnd:  f[cols["LOG-END-OFFSET"]],
				lag:     f[cols["LAG"]],
				member:  f[cols["MEMBER-ID"]],
			}
		}
	}
	return rows, totalLag
}

// checkDescribe runs `strand group describe` and checks each partition
// of topic shows committed offset commits[p], log end ends[p], their
// difference as lag, and member as its owner ("-" for none).
func checkDescribe(t *testing.T, addr, group, topic string, commits, ends map[int32]int64, member string) {
	t.Helper()
	out := runStrand(t, "group", "describe", group, "--brokers", addr)
	rows, totalLag := parseDescribe(t, out, topic)
	var total int64
	for p, end := range ends {
		want := describeRow{
			current: strconv.FormatInt(commits[p], 10),
			logEnd:  strconv.FormatInt(end, 10),
			lag:     strconv.FormatInt(end-commits[p], 10),
			member:  member,
		}
		total += end - commits[p]
		if got, ok := rows[p]; !ok || got != want {
			t.Errorf("describe %s partition %d: current/end/lag/member %s/%s/%s/%s, want %s/%s/%s/%s", group, p,
				got.current, got.logEnd, got.lag, got.member, want.current, want.logEnd, want.lag, want.member)
		}
	}
	if len(rows) != len(ends) {
		t.Errorf("describe %s: %d partition rows, want %d", group, len(rows), len(ends))
	}
	if totalLag != strconv.FormatInt(total, 10) {
		t.Errorf("describe %s: TOTAL-LAG %s, want %d", group, totalLag, total)
	}
	if t.Failed() {
		t.Logf("strand group describe %s:\n%s", group, out)
	}
}

// newGroupConsumer returns a kgo consumer of topic in group that
// commits only when told.
func newGroupConsumer(t *testing.T, addr, group, topic, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ClientID(id),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(groupSession),
		kgo.HeartbeatInterval(groupHeartbeat),
		kgo.FetchMaxWait(groupFetchMaxWait),
		// Reconnect quickly to a restarted agent.
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	return cl
}

// pollUntil polls cl, handing each record to each, until done reports
// true, and fails the test after opTimeout.
func pollUntil(t *testing.T, cl *kgo.Client, what string, each func(*kgo.Record), done func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: not done after %v", what, opTimeout)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Errorf("%s: fetch %s/%d: %v", what, topic, p, err) })
		fs.EachRecord(each)
	}
}

// TestGroupOffsetsSurviveCrash commits offsets through a kgo group
// member, kills the agent with SIGKILL right after the commit is
// acknowledged, and restarts it: `strand group describe` shows the
// committed offsets and the lag they leave, and a new member of the group
// resumes exactly at the committed offsets.
func TestGroupOffsetsSurviveCrash(t *testing.T) {
	a := startGroupAgent(t)
	const topic, group = "crash-group", "crash-g"
	counts := map[int32]int{0: 40, 1: 70, 2: 110}
	commits := map[int32]int64{0: 40, 1: 25, 2: 7} // lag 0, 45, 103
	createTopic(t, a.addr, topic, int32(len(counts)))
	produced := produceSpread(t, a.addr, topic, "c", counts)
	ends := make(map[int32]int64)
	for p, n := range counts {
		ends[p] = int64(n)
	}

	first := newGroupConsumer(t, a.addr, group, topic, "first", kgo.DisableAutoCommit())
	closed := false
	t.Cleanup(func() {
		if !closed {
			first.Close()
		}
	})
	got := 0
	pollUntil(t, first, "first member", func(*kgo.Record) { got++ }, func() bool { return got >= produced.count() })

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	offsets := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for p, o := range commits {
		offsets[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	var commitErr error
	first.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil && commitErr == nil {
					commitErr = fmt.Errorf("%s/%d: %w", rt.Topic, rp.Partition, err)
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}
	memberID, _ := first.GroupMetadata()
	a.crash(t)

	// The restarted coordinator loaded the group with its member, which
	// still owns every partition.
	checkDescribe(t, a.addr, group, topic, commits, ends, memberID)

	// The first member leaves, and a new member takes over.
	first.Close()
	closed = true
	second := newGroupConsumer(t, a.addr, group, topic, "second", kgo.DisableAutoCommit())
	t.Cleanup(second.Close)
	next := make(map[int32]int64)
	for p, o := range commits {
		next[p] = o
	}
	left := 0
	for p := range ends {
		left += int(ends[p] - commits[p])
	}
	pollUntil(t, second, "second member", func(r *kgo.Record) {
		if r.Offset != next[r.Partition] || string(r.Value) != produced[r.Partition][r.Offset] {
			t.Errorf("second member read %d/%d = %q, want offset %d (resuming at committed %d)",
				r.Partition, r.Offset, r.Value, next[r.Partition], commits[r.Partition])
			return
		}
		next[r.Partition]++
		left--
	}, func() bool { return left <= 0 || t.Failed() })
	if t.Failed() {
		return
	}
	if err := second.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("second member's commit: %v", err)
	}
	secondID, _ := second.GroupMetadata()
	checkDescribe(t, a.addr, group, topic, ends, ends, secondID)
}

// TestGroupKafkaPython runs kafka-python's group consumer (JoinGroup v2,
// SyncGroup v1, OffsetCommit v2, OffsetFetch v1) twice in one group: the
// first run reads everything and commits, the second reads only what was
// produced in between, and nothing of a partition that got no new
// records.
func TestGroupKafkaPython(t *testing.T) {
	requirePythonModule(t, "kafka", "python3-kafka")
	a := startGroupAgent(t)
	const topic, group = "py-group", "py-g"
	createTopic(t, a.addr, topic, 3)
	adm := kadm.NewClient(newClient(t, a.addr))

	// kafka-python reads snappy only with a library Debian does not
	// install with it; kgo compresses with snappy by default.
	uncompressed := kgo.ProducerBatchCompression(kgo.NoCompression())
	firstBatch := produceSpread(t, a.addr, topic, "p1", map[int32]int{0: 100, 1: 120, 2: 80}, uncompressed)
	run1 := runKafkaPythonGroup(t, a.addr, topic, group)
	checkPythonRun(t, "first run", run1, firstBatch, map[int32]int64{0: 100, 1: 120, 2: 80})
	waitCommitted(t, adm, group, topic, map[int32]int64{0: 100, 1: 120, 2: 80}, opTimeout, "after the first run")

	// Partition 2 gets nothing: the second run must read nothing there.
	secondBatch := produceSpread(t, a.addr, topic, "p2", map[int32]int{0: 30, 1: 5}, uncompressed)
	run2 := runKafkaPythonGroup(t, a.addr, topic, group)
	checkPythonRun(t, "second run", run2, secondBatch, map[int32]int64{0: 130, 1: 125, 2: 80})
	waitCommitted(t, adm, group, topic, map[int32]int64{0: 130, 1: 125, 2: 80}, opTimeout, "after the second run")

	// The agent's request counters show that the group APIs were used at
	// the versions kafka-python sends, and answered without error.
	counts := requestCounts(t, a.httpAddr)
	for _, api := range []string{"FindCoordinator", "JoinGroup", "SyncGroup", "OffsetCommit", "OffsetFetch", "LeaveGroup"} {
		if n := counts[[2]string{api, "NONE"}]; n < 2 {
			t.Errorf("%s answered without error %v times, want at least one per run", api, n)
		}
	}
	for k, n := range counts {
		if k[1] != "NONE" && slices.Contains([]string{"FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch"}, k[0]) {
			t.Errorf("%s answered %s %v times", k[0], k[1], n)
		}
	}
	t.Logf("kafka-python (broker version detected as %v) read %d then %d records", run1.APIVersion, len(run1.Records), len(run2.Records))
}

// requestCounts scrapes the agent's strand_kafka_requests_total by api
// and error.
func requestCounts(t *testing.T, httpAddr string) map[[2]string]float64 {
	t.Helper()
	code, body := httpGet(t, "http://"+httpAddr+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	out := make(map[[2]string]float64)
	const prefix = "strand_kafka_requests_total{"
	for line := range strings.Lines(body) {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if !ok || err != nil {
			t.Fatalf("metrics line %q", line)
		}
		var api, code string
		for _, l := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(l, "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "api":
				api = v
			case "error":
				code = v
			}
		}
		out[[2]string{api, code}] += n
	}
	return out
}

// pythonGroupRun is kafka_python_group.py's JSON output.
type pythonGroupRun struct {
	APIVersion []int            `json:"api_version"`
	Assignment []int32          `json:"assignment"`
	EndOffsets map[string]int64 `json:"end_offsets"`
	Positions  map[string]int64 `json:"positions"`
	Committed  map[string]int64 `json:"committed"`
	Records    [][]any          `json:"records"`
	Errors     []string         `json:"errors"`
}

func runKafkaPythonGroup(t *testing.T, addr, topic, group string) pythonGroupRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, systemPython, "testdata/kafka_python_group.py",
		"--bootstrap", addr, "--topic", topic, "--group", group)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res pythonGroupRun
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		t.Fatalf("script: %v; output not JSON (%v):\nstdout:\n%s\nstderr:\n%s", err, jerr, out, stderr.String())
	}
	for _, e := range res.Errors {
		t.Error(e)
	}
	if err != nil {
		t.Fatalf("script failed: %v\nstderr:\n%s", err, stderr.String())
	}
	return res
}

// checkPythonRun checks that a run read exactly want, each record once
// and in offset order per partition, owned every partition, and left
// the group's committed offsets at ends.
func checkPythonRun(t *testing.T, what string, run pythonGroupRun, want partitionRecords, ends map[int32]int64) {
	t.Helper()
	next := make(map[int32]int64)
	for p, rs := range want {
		next[p] = ends[p] - int64(len(rs))
	}
	for p := range ends {
		if _, ok := next[p]; !ok {
			next[p] = ends[p]
		}
	}
	bad := 0
	for _, r := range run.Records {
		if len(r) != 3 {
			t.Fatalf("%s: record %v, want [partition, offset, value]", what, r)
		}
		pf, _ := r[0].(float64)
		of, _ := r[1].(float64)
		v, _ := r[2].(string)
		p, o := int32(pf), int64(of)
		if o != next[p] || want[p][o] != v {
			t.Errorf("%s: read %d/%d = %q, want offset %d = %q", what, p, o, v, next[p], want[p][next[p]])
			if bad++; bad >= 10 {
				break
			}
			continue
		}
		next[p]++
	}
	if len(run.Records) != want.count() {
		t.Errorf("%s: read %d records, want %d", what, len(run.Records), want.count())
	}
	if len(run.Assignment) != len(ends) {
		t.Errorf("%s: assignment %v, want all %d partitions", what, run.Assignment, len(ends))
	}
	for p, end := range ends {
		k := strconv.Itoa(int(p))
		if run.EndOffsets[k] != end || run.Positions[k] != end || run.Committed[k] != end {
			t.Errorf("%s: partition %d: end offset %d, position %d, committed %d; want all %d",
				what, p, run.EndOffsets[k], run.Positions[k], run.Committed[k], end)
		}
	}
}

// TestGroupCooperativeSticky runs kgo members with the cooperative-sticky
// balancer against the agent binary: a second member joining takes half
// the partitions by incremental rebalance, the first member leaving hands
// over the rest, and every record is delivered and, in the end,
// committed.
func TestGroupCooperativeSticky(t *testing.T) {
	a := startGroupAgent(t)
	const (
		topic      = "coop-group"
		group      = "coop-g"
		partitions = 6
	)
	createTopic(t, a.addr, topic, partitions)
	adm := kadm.NewClient(newClient(t, a.addr))
	log := newDeliveryLog()
	produced := make(partitionRecords)
	batch := 0
	produce := func() partitionRecords {
		batch++
		rs := produceSpread(t, a.addr, topic, fmt.Sprintf("b%d", batch), evenCounts(partitions, 50))
		produced.merge(rs)
		return rs
	}
	// start runs a member's poll loop; the returned func stops it and
	// closes the client, which commits and leaves the group.
	start := func(id string) (stop func()) {
		cl := newGroupConsumer(t, a.addr, group, topic, id,
			kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.AutoCommitInterval(200*time.Millisecond))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil || fs.IsClientClosed() {
					return
				}
				fs.EachError(func(topic string, p int32, err error) { log.addErr("%s: fetch %s/%d: %v", id, topic, p, err) })
				fs.EachRecord(func(r *kgo.Record) {
					log.add(delivered{member: id, partition: r.Partition, offset: r.Offset, value: string(r.Value)})
				})
			}
		}()
		var once sync.Once
		stop = func() {
			once.Do(func() {
				cancel()
				<-done
				cl.Close()
			})
		}
		t.Cleanup(stop)
		return stop
	}

	produce()
	stopA := start("coop-a")
	_, d, _ := waitOwners(t, adm, group, topic, opTimeout, "coop-a owns everything", evenly([]string{"coop-a"}, partitions, partitions))
	if d.Protocol != "cooperative-sticky" {
		t.Errorf("group protocol %q, want cooperative-sticky", d.Protocol)
	}
	log.waitCovers(t, produced, opTimeout, "coop-a alone")

	mark := log.mark()
	start("coop-b")
	_, _, took := waitOwners(t, adm, group, topic, opTimeout, "coop-b takes half", evenly([]string{"coop-a", "coop-b"}, partitions/2, partitions))
	t.Logf("coop-b owns half the partitions after %v", took.Round(time.Millisecond))
	log.waitCovers(t, produce(), opTimeout, "two members")
	byMember := make(map[string]int)
	for _, d := range log.since(mark) {
		byMember[d.member]++
	}
	if byMember["coop-a"] == 0 || byMember["coop-b"] == 0 {
		t.Errorf("deliveries by member with two members: %v, want both", byMember)
	}

	stopA()
	waitOwners(t, adm, group, topic, groupSession, "coop-b takes over from coop-a", evenly([]string{"coop-b"}, partitions, partitions))
	log.waitCovers(t, produce(), opTimeout, "coop-b alone")
	waitCommitted(t, adm, group, topic, endOffsets(t, a.addr, topic), opTimeout, "auto-commit")

	repeats := log.check(t, produced)
	t.Logf("%d records produced in %d batches, %d deliveries, %d of them repeats", produced.count(), batch, log.mark(), repeats)
}
