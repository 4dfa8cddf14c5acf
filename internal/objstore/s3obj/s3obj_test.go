package s3obj_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/s3obj"
	"github.com/strandkafka/strand/internal/objstore/storetest"
)

const bucket = "strand-test"

// interceptor sits in front of gofakes3. A test sets hook to answer a
// request itself (return true) or let it through; every request is
// recorded.
type interceptor struct {
	next http.Handler
	mu   struct {
		sync.Mutex
		hook     func(w http.ResponseWriter, r *http.Request, n int) bool
		requests []string // "METHOD conditional?" per request, in order
	}
}

func (i *interceptor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	desc := r.Method
	if r.Header.Get("If-None-Match") != "" {
		desc += " if-none-match"
	}
	if r.URL.Query().Has("list-type") {
		desc += " list"
	}
	i.mu.Lock()
	i.mu.requests = append(i.mu.requests, desc)
	n := len(i.mu.requests)
	hook := i.mu.hook
	i.mu.Unlock()
	if hook != nil && hook(w, r, n) {
		return
	}
	i.next.ServeHTTP(w, r)
}

func (i *interceptor) setHook(h func(w http.ResponseWriter, r *http.Request, n int) bool) {
	i.mu.Lock()
	i.mu.hook = h
	i.mu.Unlock()
}

func (i *interceptor) count(desc string) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	n := 0
	for _, d := range i.mu.requests {
		if d == desc {
			n++
		}
	}
	return n
}

// fakeS3 starts an in-process gofakes3 server with the test bucket made.
func fakeS3(t *testing.T) (endpoint string, ic *interceptor) {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	ic = &interceptor{next: gofakes3.New(backend).Server()}
	srv := httptest.NewServer(ic)
	t.Cleanup(srv.Close)
	return srv.URL, ic
}

func newStore(t *testing.T, endpoint string, cfg s3obj.Config) *s3obj.Store {
	t.Helper()
	cfg.Bucket = bucket
	cfg.Endpoint = endpoint
	cfg.Region = "us-east-1"
	cfg.PathStyle = true
	cfg.AccessKeyID, cfg.SecretAccessKey = "test-key", "test-secret"
	s, err := s3obj.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("s3obj.New: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	tests := []struct {
		name string
		cfg  s3obj.Config
	}{
		{"NoPrefix", s3obj.Config{}},
		// Small pages make every List in the suite follow continuation
		// tokens.
		{"PrefixSmallPages", s3obj.Config{Prefix: "tenant/a/", MaxKeysPerList: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) objstore.Store {
				endpoint, _ := fakeS3(t)
				return newStore(t, endpoint, tc.cfg)
			})
		})
	}
}

func TestPrefixIsolation(t *testing.T) {
	endpoint, _ := fakeS3(t)
	ctx := context.Background()
	a := newStore(t, endpoint, s3obj.Config{Prefix: "a/"})
	b := newStore(t, endpoint, s3obj.Config{Prefix: "b/"})
	root := newStore(t, endpoint, s3obj.Config{})
	if err := a.Put(ctx, "k", []byte("from a")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "k", []byte("from b")); err != nil {
		t.Fatalf("PutIfAbsent under another prefix: %v", err)
	}
	for _, tc := range []struct {
		s    *s3obj.Store
		want string
	}{{a, "from a"}, {b, "from b"}} {
		got, err := tc.s.Get(ctx, "k", 0, -1)
		if err != nil || string(got) != tc.want {
			t.Fatalf("Get = %q, %v; want %q", got, err, tc.want)
		}
		infos, err := tc.s.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if want := []objstore.ObjectInfo{{Key: "k", Size: int64(len(tc.want))}}; !slices.Equal(infos, want) {
			t.Fatalf("List = %v, want %v", infos, want)
		}
	}
	infos, err := root.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []objstore.ObjectInfo{{Key: "a/k", Size: 6}, {Key: "b/k", Size: 6}}
	if !slices.Equal(infos, want) {
		t.Fatalf("unprefixed List = %v, want %v", infos, want)
	}
}

func TestListPagination(t *testing.T) {
	const keys = 25
	endpoint, ic := fakeS3(t)
	ctx := context.Background()
	s := newStore(t, endpoint, s3obj.Config{Prefix: "p/", MaxKeysPerList: 4})
	var want []objstore.ObjectInfo
	for i := range keys {
		k := fmt.Sprintf("obj/%03d", keys-1-i) // written in reverse order
		if err := s.Put(ctx, k, make([]byte, i)); err != nil {
			t.Fatal(err)
		}
		want = append(want, objstore.ObjectInfo{Key: k, Size: int64(i)})
	}
	slices.SortFunc(want, func(a, b objstore.ObjectInfo) int {
		if a.Key < b.Key {
			return -1
		}
		return 1
	})
	got, err := s.List(ctx, "obj/")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List =\n %v\nwant\n %v", got, want)
	}
	if pages := ic.count("GET list"); pages < (keys+3)/4 {
		t.Fatalf("List made %d page requests, want at least %d", pages, (keys+3)/4)
	}
}

// s3Error answers like S3 does for a failed request.
func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, code)
}

func isConditionalPut(r *http.Request) bool {
	return r.Method == http.MethodPut && r.Header.Get("If-None-Match") == "*"
}

func TestPutIfAbsentConflictRetried(t *testing.T) {
	endpoint, ic := fakeS3(t)
	ctx := context.Background()
	s := newStore(t, endpoint, s3obj.Config{})
	conflicts := 0
	ic.setHook(func(w http.ResponseWriter, r *http.Request, _ int) bool {
		if isConditionalPut(r) && conflicts < 2 {
			conflicts++
			s3Error(w, http.StatusConflict, "ConditionalRequestConflict")
			return true
		}
		return false
	})
	if err := s.PutIfAbsent(ctx, "k", []byte("v")); err != nil {
		t.Fatalf("PutIfAbsent after two conflicts: %v", err)
	}
	if n := ic.count("PUT if-none-match"); n != 3 {
		t.Fatalf("%d conditional PUTs, want 3 (two conflicts, one success)", n)
	}
	got, err := s.Get(ctx, "k", 0, -1)
	if err != nil || string(got) != "v" {
		t.Fatalf("Get = %q, %v", got, err)
	}
}

func TestPutIfAbsentConflictBounded(t *testing.T) {
	endpoint, ic := fakeS3(t)
	ctx := context.Background()
	s := newStore(t, endpoint, s3obj.Config{PutIfAbsentAttempts: 3})
	ic.setHook(func(w http.ResponseWriter, r *http.Request, _ int) bool {
		if isConditionalPut(r) {
			s3Error(w, http.StatusConflict, "ConditionalRequestConflict")
			return true
		}
		return false
	})
	err := s.PutIfAbsent(ctx, "k", []byte("v"))
	if err == nil || errors.Is(err, objstore.ErrExists) {
		t.Fatalf("PutIfAbsent under endless conflicts: %v, want a non-sentinel error", err)
	}
	if n := ic.count("PUT if-none-match"); n != 3 {
		t.Fatalf("%d conditional PUTs, want exactly the 3 allowed", n)
	}
}

// TestPutIfAbsentLostReply: the first conditional PUT is applied but its
// reply is lost (500). The retry meets 412; whether that means "we won"
// or "someone else did" is settled by the bytes stored.
func TestPutIfAbsentLostReply(t *testing.T) {
	tests := []struct {
		name     string
		existing string // object already there before the call; "" none
		applied  bool   // whether the lost first attempt reached the store
		wantErr  error
		wantData string
	}{
		{"our write applied", "", true, nil, "ours"},
		{"other writer's object", "theirs", false, objstore.ErrExists, "theirs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			endpoint, ic := fakeS3(t)
			ctx := context.Background()
			s := newStore(t, endpoint, s3obj.Config{})
			if tc.existing != "" {
				if err := s.Put(ctx, "k", []byte(tc.existing)); err != nil {
					t.Fatal(err)
				}
			}
			lost := false
			ic.setHook(func(w http.ResponseWriter, r *http.Request, _ int) bool {
				if !isConditionalPut(r) || lost {
					return false
				}
				lost = true
				if tc.applied {
					ic.next.ServeHTTP(httptest.NewRecorder(), r)
				}
				s3Error(w, http.StatusInternalServerError, "InternalError")
				return true
			})
			err := s.PutIfAbsent(ctx, "k", []byte("ours"))
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("PutIfAbsent: %v, want %v", err, tc.wantErr)
			}
			// No SDK retries under our loop: exactly the lost attempt and
			// one retry.
			if n := ic.count("PUT if-none-match"); n != 2 {
				t.Fatalf("%d conditional PUTs, want 2", n)
			}
			got, err := s.Get(ctx, "k", 0, -1)
			if err != nil || string(got) != tc.wantData {
				t.Fatalf("Get = %q, %v; want %q", got, err, tc.wantData)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []s3obj.Config{
		{},
		{Bucket: "b", AccessKeyID: "only-id"},
		{Bucket: "b", SecretAccessKey: "only-secret"},
	} {
		if _, err := s3obj.New(ctx, cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

// TestConnectionsKept makes 64 GETs at once, twice, as fetch read-ahead
// does: the second wave reuses the first's connections rather than
// opening its own (the SDK's default transport keeps 10 idle).
func TestConnectionsKept(t *testing.T) {
	const wave = 64
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	ic := &interceptor{next: gofakes3.New(backend).Server()}
	srv := httptest.NewUnstartedServer(ic)
	var opened atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s := newStore(t, srv.URL, s3obj.Config{})
	ctx := context.Background()
	if err := s.Put(ctx, "k", []byte("data")); err != nil {
		t.Fatal(err)
	}
	getWave := func() {
		// Every GET waits until the whole wave has arrived, so the
		// wave needs as many connections at once.
		var arrived atomic.Int64
		all := make(chan struct{})
		ic.setHook(func(w http.ResponseWriter, r *http.Request, _ int) bool {
			if r.Method == http.MethodGet && arrived.Add(1) == wave {
				close(all)
			}
			<-all
			return false
		})
		var wg sync.WaitGroup
		for range wave {
			wg.Go(func() {
				if _, err := s.Get(ctx, "k", 0, -1); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	getWave()
	first := opened.Load()
	getWave()
	if again := opened.Load() - first; first < wave || again != 0 {
		t.Fatalf("first wave of %d GETs opened %d connections, the second %d more; want none more", wave, first, again)
	}
}
