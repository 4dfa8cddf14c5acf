package objstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/clock"
)

// LatencyDist gives the delay WithLatency adds to one operation that moves
// nbytes of payload (0 for Delete and List). Implementations must be safe
// for concurrent use.
type LatencyDist interface {
	Sample(op Op, nbytes int64) time.Duration
}

// FixedLatency adds the same delay to every operation.
type FixedLatency time.Duration

func (d FixedLatency) Sample(Op, int64) time.Duration { return time.Duration(d) }

// WithLatency returns a Store that makes every operation on s take a
// delay drawn from d: the operation runs at once, and the call returns
// when the delay has passed since it began (or when the operation ends,
// if that is later). The profile's numbers are a real store's whole
// request time, and s is only a stand-in for that store: its own time (a
// local directory's fsync of a large object, say) must not be counted on
// top of them. Get draws its delay after it has read, because its
// payload size (and so its transfer time) is known only then. A call
// whose ctx ends before the operation starts runs nothing; one whose ctx
// ends during the rest of its delay returns ctx.Err() at once, though its
// operation ran, as a real store's request may land after its caller gave
// up. Delays are wall time: under testing/synctest, the bubble's fake
// time, which is all the tests that use it need.
func WithLatency(s Store, d LatencyDist) Store {
	return &latencyStore{s: s, d: d}
}

type latencyStore struct {
	s Store
	d LatencyDist
}

var _ Store = (*latencyStore)(nil)

// wait sleeps out what is left of delay since start.
func wait(ctx context.Context, start time.Time, delay time.Duration) error {
	return clock.Sleep(ctx, clock.Real, delay-clock.Since(clock.Real, start))
}

func (l *latencyStore) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	start := clock.Real.Now()
	err := l.s.Put(ctx, key, data)
	if werr := wait(ctx, start, l.d.Sample(OpPut, int64(len(data)))); werr != nil {
		return werr
	}
	return err
}

func (l *latencyStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	start := clock.Real.Now()
	err := l.s.PutIfAbsent(ctx, key, data)
	if werr := wait(ctx, start, l.d.Sample(OpPutIfAbsent, int64(len(data)))); werr != nil {
		return werr
	}
	return err
}

func (l *latencyStore) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	start := clock.Real.Now()
	out, err := l.s.Get(ctx, key, offset, length)
	if werr := wait(ctx, start, l.d.Sample(OpGet, int64(len(out)))); werr != nil {
		return nil, werr
	}
	return out, err
}

func (l *latencyStore) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	start := clock.Real.Now()
	err := l.s.Delete(ctx, key)
	if werr := wait(ctx, start, l.d.Sample(OpDelete, 0)); werr != nil {
		return werr
	}
	return err
}

func (l *latencyStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	start := clock.Real.Now()
	out, err := l.s.List(ctx, prefix)
	if werr := wait(ctx, start, l.d.Sample(OpList, 0)); werr != nil {
		return nil, werr
	}
	return out, err
}

// Quantile is one point of a latency table: a fraction Q (0 to 1) of
// requests take at most D.
type Quantile struct {
	Q float64
	D time.Duration
}

// LatencyProfile describes the request latency of one class of object
// store as quantile tables. Between two points the delay is interpolated
// linearly, so a table with points up to p99.9 and p100 carries the long
// tail that averages hide.
type LatencyProfile struct {
	Name string
	// Read is Get's time to first byte.
	Read []Quantile
	// Write is Put's and PutIfAbsent's time apart from sending the payload.
	Write []Quantile
	// Meta is Delete's and List's time.
	Meta []Quantile
	// BytesPerSecond is one request's transfer rate: a payload of n bytes
	// adds n/BytesPerSecond. Zero adds nothing.
	BytesPerSecond float64
}

const mib = 1 << 20

// S3Standard approximates published figures for S3 Standard from a client
// in the same region: first byte and small PUTs take tens of milliseconds
// at p50 with a tail reaching a few hundred milliseconds, and one request
// streams at about 80 MiB/s. These are planning numbers for simulations,
// not measurements of any deployment. Sources:
//
//   - AWS, "Performance design patterns for Amazon S3" (timeouts and
//     retries for latency-sensitive applications): small-object and
//     first-byte latencies of "roughly 100-200 milliseconds" are the tail
//     to plan for and retry past; that is the Read p99-p99.9 band here.
//     https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance-design-patterns.html
//   - AWS, "Best practices design patterns: optimizing Amazon S3
//     performance" (horizontal scaling): one request per 85-90 MB/s of
//     desired throughput, hence BytesPerSecond of 80 MiB/s.
//     https://docs.aws.amazon.com/whitepapers/latest/s3-optimizing-performance-best-practices/welcome.html
//   - Aiven Inkless, docs/inkless/PERFORMANCE.md: an S3 upload of 2-8 MiB
//     has p99 200-400 ms and a GET 100-200 ms; Write p99 (200 ms) plus 4
//     MiB at 80 MiB/s (50 ms) lands in that band.
//     https://github.com/aiven/inkless/blob/main/docs/inkless/PERFORMANCE.md
//   - AWS storage blog on WarpStream: "~400-600 ms p99 write" for a
//     produce path batching 250 ms on S3 Standard, consistent with a PUT
//     tail of a few hundred ms beyond the batching wait.
//     https://aws.amazon.com/blogs/storage/how-warpstream-enables-cost-effective-low-latency-streaming-with-amazon-s3-express-one-zone
var S3Standard = LatencyProfile{
	Name: "s3-standard",
	Read: []Quantile{
		{0, 6 * time.Millisecond}, {0.5, 20 * time.Millisecond}, {0.9, 45 * time.Millisecond},
		{0.99, 120 * time.Millisecond}, {0.999, 300 * time.Millisecond}, {1, 600 * time.Millisecond},
	},
	Write: []Quantile{
		{0, 12 * time.Millisecond}, {0.5, 35 * time.Millisecond}, {0.9, 70 * time.Millisecond},
		{0.99, 200 * time.Millisecond}, {0.999, 450 * time.Millisecond}, {1, 900 * time.Millisecond},
	},
	Meta: []Quantile{
		{0, 8 * time.Millisecond}, {0.5, 25 * time.Millisecond}, {0.9, 55 * time.Millisecond},
		{0.99, 150 * time.Millisecond}, {1, 400 * time.Millisecond},
	},
	BytesPerSecond: 80 * mib,
}

// S3Express approximates published figures for S3 Express One Zone
// (directory buckets, client in the same availability zone): consistent
// single-digit millisecond first-byte and PUT latency at p50 to p99, with
// a short tail into the tens of milliseconds. Planning numbers, not
// measurements. Sources:
//
//   - AWS, "What is S3 Express One Zone?": "consistent, single-digit
//     millisecond data access", "up to 10x faster" than S3 Standard.
//     https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-one-zone.html
//   - WarpStream's S3 Express One Zone benchmark: produce p50 105 ms and
//     p99 169 ms for a path that also batches and commits metadata before
//     it answers, so the PUT itself sits well under that at the tail.
//     https://www.warpstream.com/blog/warpstream-s3-express-one-zone-benchmark-and-total-cost-of-ownership
var S3Express = LatencyProfile{
	Name: "s3-express",
	Read: []Quantile{
		{0, 1 * time.Millisecond}, {0.5, 3 * time.Millisecond}, {0.9, 5 * time.Millisecond},
		{0.99, 9 * time.Millisecond}, {0.999, 15 * time.Millisecond}, {1, 30 * time.Millisecond},
	},
	Write: []Quantile{
		{0, 2 * time.Millisecond}, {0.5, 5 * time.Millisecond}, {0.9, 8 * time.Millisecond},
		{0.99, 14 * time.Millisecond}, {0.999, 25 * time.Millisecond}, {1, 50 * time.Millisecond},
	},
	Meta: []Quantile{
		{0, 1 * time.Millisecond}, {0.5, 4 * time.Millisecond}, {0.9, 7 * time.Millisecond},
		{0.99, 12 * time.Millisecond}, {1, 30 * time.Millisecond},
	},
	BytesPerSecond: 160 * mib,
}

// ErrBadLatencyProfile: a quantile table is malformed.
var ErrBadLatencyProfile = errors.New("objstore: bad latency profile")

// Validate checks that every table starts at Q=0, ends at Q=1, and rises
// in both Q and D.
func (p LatencyProfile) Validate() error {
	for _, tb := range []struct {
		name string
		q    []Quantile
	}{{"read", p.Read}, {"write", p.Write}, {"meta", p.Meta}} {
		q := tb.q
		if len(q) < 2 || q[0].Q != 0 || q[len(q)-1].Q != 1 {
			return fmt.Errorf("%w: %s %s table must run from Q=0 to Q=1", ErrBadLatencyProfile, p.Name, tb.name)
		}
		for i := 1; i < len(q); i++ {
			if q[i].Q <= q[i-1].Q || q[i].D < q[i-1].D || q[i-1].D < 0 {
				return fmt.Errorf("%w: %s %s table point %d does not rise", ErrBadLatencyProfile, p.Name, tb.name, i)
			}
		}
	}
	if p.BytesPerSecond < 0 {
		return fmt.Errorf("%w: %s BytesPerSecond < 0", ErrBadLatencyProfile, p.Name)
	}
	return nil
}

// Latency draws delays from a LatencyProfile with a seeded source. Safe for
// concurrent use; a single-goroutine run replays exactly from its seed.
type Latency struct {
	profile LatencyProfile
	mu      struct {
		sync.Mutex
		rnd *rand.Rand
	}
}

var _ LatencyDist = (*Latency)(nil)

// NewLatency returns a LatencyDist for p seeded with seed.
func NewLatency(p LatencyProfile, seed uint64) (*Latency, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	l := &Latency{profile: p}
	l.mu.rnd = rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	return l, nil
}

func (l *Latency) Sample(op Op, nbytes int64) time.Duration {
	l.mu.Lock()
	u := l.mu.rnd.Float64()
	l.mu.Unlock()
	var table []Quantile
	switch op {
	case OpGet:
		table = l.profile.Read
	case OpPut, OpPutIfAbsent:
		table = l.profile.Write
	default:
		table = l.profile.Meta
	}
	d := quantileAt(table, u)
	if l.profile.BytesPerSecond > 0 && nbytes > 0 {
		d += time.Duration(float64(nbytes) / l.profile.BytesPerSecond * float64(time.Second))
	}
	return d
}

// quantileAt interpolates the inverse CDF given by a validated table at u.
func quantileAt(q []Quantile, u float64) time.Duration {
	for i := 1; i < len(q); i++ {
		if u <= q[i].Q {
			lo, hi := q[i-1], q[i]
			frac := (u - lo.Q) / (hi.Q - lo.Q)
			return lo.D + time.Duration(frac*float64(hi.D-lo.D))
		}
	}
	return q[len(q)-1].D
}
