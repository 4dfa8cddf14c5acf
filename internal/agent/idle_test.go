package agent_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/testservers/dynalitetest"
)

// Acceptance of issue 28's idle log, with the agents' defaults: an agent
// alone on an S3 or DynamoDB log for a real minute sends the service at
// most idleAgentMaxRequests requests, counted at an endpoint in front of
// the service; then a second agent joins, and idleTries records
// produced on the first are each fetched from the second within
// idleFetchP99 at the 99th percentile.
const (
	idleAgentMaxRequests = 6
	idleTries            = 100
	idleFetchP99         = 100 * time.Millisecond
)

// countedService is a log service whose requests are counted per agent:
// each agent gets its own endpoint in front of one service.
type countedService struct {
	// logURL returns the log URL for an agent whose requests count in n.
	logURL func(t *testing.T, n *atomic.Int64) string
}

// countingProxy serves h on a new endpoint that counts its requests.
func countingProxy(t *testing.T, h http.Handler, n *atomic.Int64) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func s3Service(t *testing.T) countedService {
	backend := s3mem.New()
	if err := backend.CreateBucket("strand"); err != nil {
		t.Fatal(err)
	}
	h := gofakes3.New(backend).Server()
	return countedService{logURL: func(t *testing.T, n *atomic.Int64) string {
		return "s3://strand/log?region=us-east-1&path-style=true&endpoint=" + url.QueryEscape(countingProxy(t, h, n))
	}}
}

func dynamoService(t *testing.T) countedService {
	srv := dynalitetest.Start(t)
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	logID := fmt.Sprintf("idle-%d", time.Now().UnixNano())
	return countedService{logURL: func(t *testing.T, n *atomic.Int64) string {
		return fmt.Sprintf("dynamodb://strand_idle/%s?region=%s&endpoint=%s",
			logID, dynalitetest.Region, url.QueryEscape(countingProxy(t, proxy, n)))
	}}
}

func TestIdleAgentRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("a real idle minute per backend")
	}
	// Both services take any credentials; the agents find these.
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	for _, tc := range []struct {
		name    string
		service func(t *testing.T) countedService
	}{
		{"s3", s3Service},
		{"dynamodb", dynamoService},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a minute each, and nothing shared
			testIdleAgent(t, tc.service(t))
		})
	}
}

func testIdleAgent(t *testing.T, svc countedService) {
	objects := "file://" + filepath.ToSlash(t.TempDir())
	var nA, nB atomic.Int64
	cfg := func(logURL, rack string) agent.Config {
		// Defaults but for the store of records (a directory: this
		// counts the log) and a rack, so each client is served in its
		// own zone and the record crosses agents.
		return agent.Config{DataDir: t.TempDir(), Log: logURL, ObjStore: objects, Rack: rack}
	}
	a := startWith(t, cfg(svc.logURL(t, &nA), "a"), nil)
	// Created before the minute: the topic's creation is not idleness.
	createTopic(t, a.KafkaAddr(), "idle", 1)

	time.Sleep(2 * time.Second) // settle into the idle cadence
	start := nA.Load()
	time.Sleep(time.Minute)
	idle := nA.Load() - start
	t.Logf("agent alone, idle for a minute: %d requests to the log service", idle)
	if idle > idleAgentMaxRequests {
		t.Errorf("an idle agent sent %d requests in a minute, want at most %d", idle, idleAgentMaxRequests)
	}

	b := startWith(t, cfg(svc.logURL(t, &nB), "b"), nil)
	producer := client(t, a.KafkaAddr(), kgo.ClientID("strand_zone=a"), kgo.DefaultProduceTopic("idle"))
	consumer := client(t, b.KafkaAddr(), kgo.ClientID("strand_zone=b"), kgo.Rack("b"),
		kgo.ConsumeTopics("idle"), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))

	var mu sync.Mutex
	got := map[int]time.Time{}
	arrived := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			fs := consumer.PollFetches(ctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				i, err := strconv.Atoi(string(r.Value))
				if err != nil {
					return
				}
				if r.Offset >= 0 && string(r.Key) == "try" {
					mu.Lock()
					got[i] = now
					mu.Unlock()
					select {
					case arrived <- struct{}{}:
					default:
					}
				}
			})
		}
	}()
	// The consumer is in place (its position at the end) once a first
	// record, not timed, comes through.
	waitArrival := func(i int) time.Time {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			mu.Lock()
			at, ok := got[i]
			mu.Unlock()
			if ok {
				return at
			}
			select {
			case <-arrived:
			case <-deadline:
				t.Fatalf("record %d not fetched from agent b within 30s", i)
			}
		}
	}
	produce := func(i int) time.Time {
		t.Helper()
		r := &kgo.Record{Key: []byte("try"), Value: []byte(strconv.Itoa(i))}
		if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		return time.Now()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		produce(-1)
		mu.Lock()
		_, ok := got[-1]
		mu.Unlock()
		if ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitArrival(-1)

	var lat []time.Duration
	for i := range idleTries {
		acked := produce(i)
		lat = append(lat, waitArrival(i).Sub(acked))
		// The next record comes at any point of agent b's poll period.
		time.Sleep(rand.N(40 * time.Millisecond))
	}
	slices.Sort(lat)
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100-1]
	t.Logf("produced on agent a, fetched from agent b: p50 %v, p99 %v, max %v over %d tries", p50, p99, lat[len(lat)-1], len(lat))
	if p99 > idleFetchP99 {
		t.Errorf("p99 %v from acknowledgement on agent a to fetch from agent b, want at most %v", p99, idleFetchP99)
	}
}
