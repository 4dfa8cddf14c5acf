package bench

// Storage sampling: what the object store holds over a run, beside the
// agent's DELETE and LIST rate and CPU, to watch retention and garbage
// collection bound the stored bytes (docs/performance.md's retention plateau run).

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/fileobj"
	"github.com/strandkafka/strand/internal/objstore/objurl"
)

// DefaultStorageEvery is the sampling period when --objstore is given
// without --storage-every: a full listing every 10 s costs little even
// on S3 and shows a 60 s retention plateau in a few points per period.
const DefaultStorageEvery = 10 * time.Second

// StorageResult is what the object store held over the run.
type StorageResult struct {
	Store   string          `json:"store"`
	Every   string          `json:"every"`
	Samples []StorageSample `json:"samples"`
	// PeakDataBytes is the most data bytes any sample saw.
	PeakDataBytes int64 `json:"peak_data_bytes"`
	// SampleErrors counts the samples that failed (listing or scrape);
	// the first is in FirstError.
	SampleErrors int    `json:"sample_errors,omitempty"`
	FirstError   string `json:"first_error,omitempty"`
}

// StorageSample is one listing of the store. Data is every object outside
// the metadata snapshots (agent.SnapshotPrefix). The rates are the
// agent's (from /metrics, 0 without --http) since the previous sample.
type StorageSample struct {
	T               float64 `json:"t"` // seconds since the run started
	DataBytes       int64   `json:"data_bytes"`
	DataObjects     int64   `json:"data_objects"`
	SnapshotBytes   int64   `json:"snapshot_bytes"`
	SnapshotObjects int64   `json:"snapshot_objects"`
	DeletesPerSec   float64 `json:"objstore_deletes_per_sec"`
	ListsPerSec     float64 `json:"objstore_lists_per_sec"`
	CPUCores        float64 `json:"cpu_cores"`
}

// sampleStore lists the whole store once.
func sampleStore(ctx context.Context, store objstore.Store) (StorageSample, error) {
	objs, err := store.List(ctx, "")
	if err != nil {
		return StorageSample{}, fmt.Errorf("bench: list the object store: %w", err)
	}
	var s StorageSample
	for _, o := range objs {
		if strings.HasPrefix(o.Key, agent.SnapshotPrefix) {
			s.SnapshotBytes += o.Size
			s.SnapshotObjects++
		} else {
			s.DataBytes += o.Size
			s.DataObjects++
		}
	}
	return s, nil
}

// addRates sets the per-second rates between two scrapes secs apart.
func (s *StorageSample) addRates(prev, cur AgentMetrics, secs float64) {
	if secs <= 0 {
		return
	}
	s.DeletesPerSec = (cur.ObjRequests["delete"] - prev.ObjRequests["delete"]) / secs
	s.ListsPerSec = (cur.ObjRequests["list"] - prev.ObjRequests["list"]) / secs
	s.CPUCores = (cur.CPUSeconds - prev.CPUSeconds) / secs
}

// openSampledStore opens the store at rawURL for listing. A file store
// is opened shared: the agent writing it has temporaries in flight.
func openSampledStore(ctx context.Context, rawURL string) (objstore.Store, error) {
	t, err := objurl.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("bench: --objstore: %w", err)
	}
	if t.Kind == objurl.KindFile {
		return fileobj.OpenShared(t.Dir)
	}
	return objurl.Open(ctx, rawURL)
}

// storageSampler lists the store every period from start to finish, in
// its own goroutine so that a slow listing never delays the load's
// once-a-second accounting.
type storageSampler struct {
	store       objstore.Store
	metricsAddr string
	epoch       time.Time
	pw          *progressWriter

	stop chan struct{}
	done chan struct{}

	mu struct {
		sync.Mutex
		res      StorageResult
		prev     AgentMetrics
		prevAt   time.Time
		havePrev bool
	}
}

// startStorageSampler takes the first sample before returning.
func startStorageSampler(ctx context.Context, store objstore.Store, name, metricsAddr string, every time.Duration, epoch time.Time, pw *progressWriter) *storageSampler {
	s := &storageSampler{store: store, metricsAddr: metricsAddr, epoch: epoch, pw: pw,
		stop: make(chan struct{}), done: make(chan struct{})}
	s.mu.res = StorageResult{Store: name, Every: every.String()}
	s.sample(ctx)
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.stop:
				return
			case <-t.C:
				s.sample(ctx)
			}
		}
	}()
	return s
}

// finish stops the period, takes the last sample and returns them all.
func (s *storageSampler) finish(ctx context.Context) *StorageResult {
	close(s.stop)
	<-s.done
	s.sample(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	res := s.mu.res
	return &res
}

func (s *storageSampler) sample(ctx context.Context) {
	now := time.Now()
	smp, err := sampleStore(ctx, s.store)
	var m AgentMetrics
	if err == nil && s.metricsAddr != "" {
		m, err = Scrape(ctx, s.metricsAddr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res := &s.mu.res
	if err != nil {
		if res.SampleErrors == 0 {
			res.FirstError = err.Error()
			s.pw.note("storage sample: %v", err)
		}
		res.SampleErrors++
		return
	}
	smp.T = now.Sub(s.epoch).Seconds()
	if s.mu.havePrev {
		smp.addRates(s.mu.prev, m, now.Sub(s.mu.prevAt).Seconds())
	}
	if s.metricsAddr != "" {
		s.mu.prev, s.mu.prevAt, s.mu.havePrev = m, now, true
	}
	res.Samples = append(res.Samples, smp)
	res.PeakDataBytes = max(res.PeakDataBytes, smp.DataBytes)
	s.pw.note("%5.0fs stored %8.1f MB in %6d data objects, snapshots %6.1f MB; agent %6.1f DELETE/s %5.2f LIST/s %5.2f cores",
		smp.T, float64(smp.DataBytes)/1e6, smp.DataObjects, float64(smp.SnapshotBytes)/1e6, smp.DeletesPerSec, smp.ListsPerSec, smp.CPUCores)
}

// writeStorage prints the samples as a table.
func writeStorage(b *strings.Builder, s *StorageResult) {
	if s == nil {
		return
	}
	fmt.Fprintf(b, "\nobject store %s, listed every %s (MB = 10^6 B; rates are the agent's since the previous sample)\n", s.Store, s.Every)
	fmt.Fprintf(b, "  %7s %12s %9s %12s %10s %9s %7s\n", "t (s)", "stored MB", "objects", "snapshot MB", "DELETE/s", "LIST/s", "cores")
	for _, p := range s.Samples {
		fmt.Fprintf(b, "  %7.0f %12.1f %9d %12.1f %10.1f %9.2f %7.2f\n",
			p.T, float64(p.DataBytes)/1e6, p.DataObjects, float64(p.SnapshotBytes)/1e6, p.DeletesPerSec, p.ListsPerSec, p.CPUCores)
	}
	fmt.Fprintf(b, "  peak stored %.1f MB", float64(s.PeakDataBytes)/1e6)
	if s.SampleErrors > 0 {
		fmt.Fprintf(b, "; %d samples failed, first: %s", s.SampleErrors, s.FirstError)
	}
	b.WriteString("\n")
}
