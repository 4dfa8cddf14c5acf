package replica

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore/s3obj"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/dynamolog"
	"github.com/strandkafka/strand/internal/sharedlog/s3log"
	"github.com/strandkafka/strand/internal/testservers/dynalitetest"
)

// Acceptance of an idle log (STRAND_E2E_LONG: a real minute per
// backend). Two agents' copies, each through its own VirtualLog and its
// own endpoint in front of one service, so the service side counts each
// agent's requests; they idle for a minute, then agent b long-polls
// (holds a watch, as a waiting Fetch does) while agent a commits, 100
// times.
const (
	idleTries       = 100
	idleLatencyP99  = 100 * time.Millisecond
	idleMaxRequests = 6
)

// countingEndpoint serves h on a new endpoint that counts its requests.
func countingEndpoint(t *testing.T, h http.Handler) (string, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// idleAgentLog opens one agent's VirtualLog and returns the requests
// the service served it.
type idleAgentLog func(t *testing.T) (sharedlog.Log, *atomic.Int64)

func s3IdleLogs(t *testing.T) idleAgentLog {
	backend := s3mem.New()
	if err := backend.CreateBucket("strand-log"); err != nil {
		t.Fatal(err)
	}
	h := gofakes3.New(backend).Server()
	return func(t *testing.T) (sharedlog.Log, *atomic.Int64) {
		endpoint, n := countingEndpoint(t, h)
		cfg := s3obj.Config{Bucket: "strand-log", Prefix: "log/", Endpoint: endpoint, Region: "us-east-1",
			PathStyle: true, AccessKeyID: "test", SecretAccessKey: "test"}
		ms, err := s3log.NewMetaStore(testCtx(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		open := func(ctx context.Context, u string) (sharedlog.Loglet, error) {
			seg := cfg
			seg.Prefix += u + "/"
			return s3log.Open(ctx, seg, s3log.Options{})
		}
		return openIdleVirtual(t, ms, open), n
	}
}

func dynamoIdleLogs(t *testing.T) idleAgentLog {
	srv := dynalitetest.Start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dynalite's stderr:\n%s", srv.Stderr())
		}
	})
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	logID := fmt.Sprintf("idle-%d", time.Now().UnixNano())
	return func(t *testing.T) (sharedlog.Log, *atomic.Int64) {
		endpoint, n := countingEndpoint(t, proxy)
		db, err := dynamolog.Connect(testCtx(t), dynamolog.Config{Table: "strand_idle", Endpoint: endpoint,
			Region: dynalitetest.Region, AccessKeyID: "test", SecretAccessKey: "test"})
		if err != nil {
			t.Fatal(err)
		}
		ms, err := db.MetaStore(logID)
		if err != nil {
			t.Fatal(err)
		}
		open := func(ctx context.Context, u string) (sharedlog.Loglet, error) {
			return db.Loglet(logID+"/"+u, dynamolog.Options{})
		}
		return openIdleVirtual(t, ms, open), n
	}
}

func openIdleVirtual(t *testing.T, ms sharedlog.MetaStore, open sharedlog.Opener) sharedlog.Log {
	t.Helper()
	v, err := sharedlog.OpenVirtual(testCtx(t), ms, open, sharedlog.VirtualOptions{InitialURL: "seg-0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// TestIdleMinuteThenCommits measures what the acceptance of an idle log
// asks: at most idleMaxRequests requests per agent, counted by the
// service, over a real idle minute; then a commit on agent a applied on
// agent b, which long-polls, within idleLatencyP99 at the 99th
// percentile of idleTries.
func TestIdleMinuteThenCommits(t *testing.T) {
	if testing.Short() || os.Getenv("STRAND_E2E_LONG") == "" {
		t.Skip("a real idle minute per backend: set STRAND_E2E_LONG=1")
	}
	for _, tc := range []struct {
		name string
		logs func(t *testing.T) idleAgentLog
	}{
		{"s3", s3IdleLogs},
		{"dynamodb", dynamoIdleLogs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := tc.logs(t)
			logA, countA := logs(t)
			logB, countB := logs(t)
			a, b := openReplica(t, logA, "", "a"), openReplica(t, logB, "", "b")
			mustOK(t, a, meta.CreateTopic{Name: "warm", Partitions: 1})
			mustSync(t, b)

			// Let both players settle into their idle polls.
			time.Sleep(time.Second)
			startA, startB := countA.Load(), countB.Load()
			time.Sleep(time.Minute)
			idleA, idleB := countA.Load()-startA, countB.Load()-startB
			t.Logf("idle minute: agent a %d requests, agent b %d", idleA, idleB)
			if idleA > idleMaxRequests || idleB > idleMaxRequests {
				t.Errorf("idle minute: agents sent %d and %d requests, want at most %d each", idleA, idleB, idleMaxRequests)
			}

			var lat []time.Duration
			for i := range idleTries {
				w := b.Watch(nil)
				// The commit lands anywhere in b's poll period.
				time.Sleep(rand.N(40 * time.Millisecond))
				mustOK(t, a, meta.CreateTopic{Name: fmt.Sprintf("t%d", i), Partitions: 1})
				committed := time.Now()
				if err := b.WaitApplied(testCtx(t), a.NextToApply()); err != nil {
					t.Fatal(err)
				}
				lat = append(lat, time.Since(committed))
				w.Close()
			}
			slices.Sort(lat)
			p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100-1]
			t.Logf("commit on a to applied on b: p50 %v, p99 %v, max %v over %d tries", p50, p99, lat[len(lat)-1], len(lat))
			if p99 > idleLatencyP99 {
				t.Errorf("p99 %v, want at most %v", p99, idleLatencyP99)
			}
		})
	}
}
