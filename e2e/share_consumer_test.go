package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// The consumer process of the share-group chaos test and benchmark: the
// test binary re-executed with shareConsumerEnv set to a JSON
// shareConsumerConfig (TestMain runs it instead of the tests), so a
// kill -9 kills a real client with its connections, as a crashed worker
// would die.

const shareConsumerEnv = "STRAND_E2E_SHARE_CONSUMER"

type shareConsumerConfig struct {
	Brokers []string `json:"brokers"`
	Topic   string   `json:"topic"`
	Group   string   `json:"group"`
	Name    string   `json:"name"` // incarnation, e.g. "c3.2"; the client id
	LogPath string   `json:"log"`  // its history, appended as JSON lines
	// MaxDelay bounds the random processing time per record (uniform in
	// [0, MaxDelay]); 0 processes at once.
	MaxDelay time.Duration `json:"max_delay"`
	// Hold, if set, is the processing time of every record instead: the
	// benchmark's redelivery trials hold a record until killed.
	Hold time.Duration `json:"hold"`
	// MaxRecords caps the records one poll acquires, so a slow consumer
	// does not sit on a partition's worth of locks.
	MaxRecords int32 `json:"max_records"`
	// PoisonEvery: the records whose number is a multiple of it are
	// always released, so they must end archived at the delivery limit.
	PoisonEvery int `json:"poison_every"`
	// Classic consumes in a classic group instead (the benchmark's
	// baseline), committing after each poll; it logs acq events only.
	Classic bool `json:"classic"`
	// Quiet logs nothing but the first acquisition of each poll (the
	// benchmark's throughput run needs no history).
	Quiet bool `json:"quiet"`
}

// monoNow is CLOCK_MONOTONIC in ns: one clock for every process of the
// machine, unlike time.Now's monotonic reading, which is per process.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// recordNumber parses the producer's unique id "r-<n>".
func recordNumber(id string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "r-"))
	return n, err == nil && strings.HasPrefix(id, "r-")
}

func shareRecordID(n int) string { return fmt.Sprintf("r-%07d", n) }

// eventWriter appends JSON lines with one write each, so a kill -9
// leaves at worst a torn last line.
type eventWriter struct {
	mu sync.Mutex
	f  *os.File
}

func (w *eventWriter) write(e shareEvent) {
	b, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.Write(append(b, '\n')); err != nil {
		panic(err)
	}
}

func openEventWriter(path string) (*eventWriter, error) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &eventWriter{f: f}, nil
}

// runShareConsumer is the consumer process's main: it consumes until it
// is killed.
func runShareConsumer(raw string) int {
	var cfg shareConsumerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "share consumer config:", err)
		return 2
	}
	w, err := openEventWriter(cfg.LogPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := consumeShare(context.Background(), cfg, w); err != nil {
		fmt.Fprintln(os.Stderr, "share consumer:", err)
		return 1
	}
	return 0
}

func consumeShare(ctx context.Context, cfg shareConsumerConfig, w *eventWriter) error {
	var mu sync.Mutex
	var results []kgo.ShareAckResult
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...), kgo.ConsumeTopics(cfg.Topic), kgo.ClientID(cfg.Name),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}
	if cfg.Classic {
		opts = append(opts, kgo.ConsumerGroup(cfg.Group), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	} else {
		opts = append(opts, kgo.ShareGroup(cfg.Group),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				mu.Lock()
				results = append(results, rs...)
				mu.Unlock()
			}))
		if cfg.MaxRecords > 0 {
			opts = append(opts, kgo.ShareMaxRecords(cfg.MaxRecords), kgo.ShareMaxRecordsStrict())
		}
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		recs := fs.Records()
		now, wall := monoNow(), time.Now()
		for i, r := range recs {
			if cfg.Quiet && i > 0 {
				break
			}
			e := shareEvent{T: now, Ev: evAcquired, Consumer: cfg.Name, Partition: r.Partition, Offset: r.Offset,
				ID: string(r.Value), Delivery: r.DeliveryCount()}
			if d := r.AcquisitionDeadline(); !d.IsZero() {
				e.Deadline = now + int64(d.Sub(wall))
			}
			w.write(e)
		}
		if cfg.Classic {
			if cfg.Hold > 0 && len(recs) > 0 {
				time.Sleep(cfg.Hold)
			}
			if err := cl.CommitRecords(ctx, recs...); err != nil {
				return err
			}
			continue
		}
		for _, r := range recs {
			switch {
			case cfg.Hold > 0:
				time.Sleep(cfg.Hold)
			case cfg.MaxDelay > 0:
				time.Sleep(rand.N(cfg.MaxDelay + 1))
			}
			status, ack := kgo.AckAccept, ackAccept
			if n, ok := recordNumber(string(r.Value)); ok && cfg.PoisonEvery > 0 && n%cfg.PoisonEvery == 0 {
				status, ack = kgo.AckRelease, ackRelease
			}
			if cfg.Quiet {
				r.Ack(status)
				continue
			}
			mu.Lock()
			results = results[:0]
			mu.Unlock()
			base := shareEvent{Consumer: cfg.Name, Partition: r.Partition, Offset: r.Offset, ID: string(r.Value), Ack: ack}
			sent := base
			sent.T, sent.Ev = monoNow(), evSent
			w.write(sent)
			// One record's ack per flush, so the callback's answer for
			// the partition is this record's.
			r.Ack(status)
			flushErr := cl.FlushAcks(ctx)
			answer := base
			answer.T, answer.Ev = monoNow(), evAckErr
			mu.Lock()
			found := false
			for _, res := range results {
				if res.Topic == r.Topic && res.Partition == r.Partition {
					found = true
					if res.Err != nil {
						answer.Err = res.Err.Error()
					}
				}
			}
			mu.Unlock()
			switch {
			case flushErr != nil:
				answer.Err = "flush: " + flushErr.Error()
			case !found:
				answer.Err = "no answer for the partition"
			case answer.Err == "":
				answer.Ev = evAckOK
			}
			w.write(answer)
		}
	}
}

// shareProc is one consumer process.
type shareProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	out  *lockedBuffer
}

// startShareProc re-executes the test binary as a consumer.
func startShareProc(t testing.TB, cfg shareConsumerConfig) *shareProc {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), shareConsumerEnv+"="+string(raw))
	p := &shareProc{name: cfg.Name, cmd: cmd, done: make(chan struct{}), out: new(lockedBuffer)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start consumer %s: %v", cfg.Name, err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() && p.out.String() != "" {
			t.Logf("consumer %s output:\n%s", p.name, p.out.String())
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *shareProc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// setShareAutoOffsetReset sets the group's share.auto.offset.reset
// (IncrementalAlterConfigs on a GROUP resource, KIP-932), so the group
// reads what was produced before it started.
func setShareAutoOffsetReset(ctx context.Context, cl *kgo.Client, group, value string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name = "share.auto.offset.reset"
	c.Value = kmsg.StringPtr(value)
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("set share.auto.offset.reset of %s: %w", group, err)
		}
	}
	return nil
}
