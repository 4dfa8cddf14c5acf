package agent_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
	"github.com/strandkafka/strand/internal/sharedlog/filelog/faultfs"
)

// Issue 19, defect 2: a short disk-full on the data dir (the file log and
// Pebble) stopped the agent for good while /readyz said ready, and the
// next snapshot panicked inside Pebble.

// TestLogWriteFailureRecovers: while the file log cannot write, a
// produce gets a Kafka error (not a client-side timeout) and /readyz
// answers 503 with the reason; once the disk takes writes again the same
// agent serves produces and is ready, without a restart, and nothing
// acknowledged is lost.
func TestLogWriteFailureRecovers(t *testing.T) {
	const topic = "diskfull"
	logFS := faultfs.Wrap(filelog.OS)
	cfg := agent.Config{DataDir: t.TempDir()}
	agent.SetLogFS(&cfg, logFS)
	a := startWith(t, cfg, nil)
	addr, readyz := a.KafkaAddr(), "http://"+a.HTTPAddr()+"/readyz"
	createTopic(t, addr, topic, 2)
	want := records(topic, 2, 20, "before")
	produce(t, addr, want)

	logFS.Set(faultfs.Fault{Ops: faultfs.OpWrite | faultfs.OpSync, Match: func(path string) bool {
		return strings.HasSuffix(path, ".seg")
	}})
	req := batchtest.ProduceRequest(topic, 0, batchtest.Build(t, batchtest.Options{Records: 3, ValueBytes: 10}),
		int32(opTimeout.Milliseconds()))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cl := client(t, addr)
	// kgo sends Produce at v13, which names topics by id.
	md, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil || md[topic].Err != nil {
		t.Fatalf("topic id of %s: %v %v", topic, err, md[topic].Err)
	}
	req.Topics[0].TopicID = md[topic].ID
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce while the log cannot write: %v", err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.RequestTimedOut.Code {
		t.Fatalf("produce while the log cannot write: %v, want REQUEST_TIMED_OUT (retriable: the batch may or may not be committed)", kerr.ErrorForCode(code))
	}
	code, body := get(t, readyz)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "appends to the shared log fail") ||
		!strings.Contains(body, "no space left on device") {
		t.Fatalf("/readyz while appends fail: %d %q, want 503 with the reason", code, body)
	}

	logFS.Clear()
	after := records(topic, 2, 20, "after")
	// An entry can apply, and so a produce be answered, before the
	// Append that wrote it has returned and told /readyz. The replica
	// appends one entry at a time, so the second produce is answered
	// only after the first one's Append returned.
	produce(t, addr, after[:10])
	produce(t, addr, after[10:])
	if code, body := get(t, readyz); code != http.StatusOK {
		t.Fatalf("/readyz once appends work again: %d %q", code, body)
	}
	checkRecords(t, addr, topic, append(want, after...))
}

// TestPebbleWriteFailureExits: when Pebble cannot write, the agent exits
// at once through its one exit, with status FailStopExitCode and a
// message naming the cause, where it used to panic inside Pebble at the
// next snapshot ("rotateWAL ... sync: unlock of unlocked mutex").
//
// The agent is not stopped afterwards: as after a real exit, the Pebble
// goroutine that met the failure never resumes, so Stop would wait for
// it. It is left to the end of the test binary.
func TestPebbleWriteFailureExits(t *testing.T) {
	dir := t.TempDir()
	var full atomic.Bool
	exited := make(chan int, 1)
	cfg := agent.Config{DataDir: dir, SnapshotInterval: agent.SnapshotsOff}
	agent.SetExit(&cfg, func(code int) { exited <- code })
	agent.SetMetaFS(&cfg, diskFullFS(filepath.Join(dir, "meta"), &full))
	var logs logBuffer
	a := startWith(t, cfg, logs.logger())
	markStopped(a)
	createTopic(t, a.KafkaAddr(), "t", 1)
	produce(t, a.KafkaAddr(), records("t", 1, 10, "before"))

	full.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+a.HTTPAddr()+agent.PathSnapshot, nil)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	wait, cancelWait := context.WithTimeout(context.Background(), opTimeout)
	defer cancelWait()
	select {
	case code := <-exited:
		if code != agent.FailStopExitCode {
			t.Errorf("exit status %d, want %d", code, agent.FailStopExitCode)
		}
	case <-wait.Done():
		t.Fatal("Pebble could not write and the agent did not exit")
	}
	if l := logs.String(); !strings.Contains(l, "stopping at once") || !strings.Contains(l, "no space left on device") {
		t.Errorf("the log does not say why the agent stopped:\n%s", l)
	}
	if code, body := get(t, "http://"+a.HTTPAddr()+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz after the fail-stop: %d %q, want 503", code, body)
	}
}

// diskFullFS is a Pebble file system on which, while full is set, writes
// and fsyncs of the files in dir fail with ENOSPC.
func diskFullFS(dir string, full *atomic.Bool) vfs.FS {
	return errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch {
		case !full.Load() || filepath.Dir(op.Path) != dir:
			return nil
		case op.Kind == errorfs.OpFileWrite, op.Kind == errorfs.OpFileWriteAt, op.Kind == errorfs.OpFileSync:
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	}))
}
