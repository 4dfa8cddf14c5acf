package agent

import (
	"context"
	"errors"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/kafka"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/sharedlog"
)

// metrics is the agent's Prometheus registry and the adapters that feed it
// from the Kafka server, the produce pipeline, the log and the object
// store.
type metrics struct {
	reg *prometheus.Registry

	requests       *prometheus.CounterVec   // api, error
	requestLatency *prometheus.HistogramVec // api
	produceBytes   prometheus.Counter
	fetchBytes     prometheus.Counter
	connsClosed    *prometheus.CounterVec // reason
	flushBytes     prometheus.Histogram
	flushLatency   prometheus.Histogram
	// uploadHedges counts hedged data object uploads (produce/hedge.go).
	uploadHedges  *prometheus.CounterVec // result
	logAppend     prometheus.Histogram
	logAppendErrs prometheus.Counter
	logRequests   *prometheus.CounterVec
	// Long-polling Fetches' wake-ups and the partitions they read again
	// (kafka.WaitObserver).
	fetchWakeups   prometheus.Counter
	fetchRechecked prometheus.Counter
	// Client quotas: requests after which a client was throttled, and
	// for how long (kafka.RequestStats.Throttle).
	throttled       *prometheus.CounterVec // api
	throttleSeconds *prometheus.CounterVec // api
	// Snapshot GC (snapshot.go): what it deleted.
	snapGCManifests prometheus.Counter
	snapGCFiles     prometheus.Counter
	snapGCBytes     prometheus.Counter

	connsOpened *prometheus.CounterVec // listener
	// certs reports the TLS listeners' certificate expiries
	// (metrics_certs.go).
	certs *certExpiry
	// topics counts record traffic per topic (metrics_topics.go).
	topics *topicTraffic
	// zones counts traffic by client and agent zone (metrics_zones.go);
	// nil until registerZones.
	zones *zoneTraffic
	// objOps are the object store's request counters and latency
	// histograms, one set per objstore.Op, resolved once so a request
	// looks nothing up.
	objOps [len(objstore.Ops)]struct {
		ok, failed, bytes prometheus.Counter
		latency           prometheus.Observer
	}
}

// latencyBuckets spans a local fsync (tens of µs) to an S3 Standard tail
// (seconds).
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 17)

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), topics: newTopicTraffic(), certs: &certExpiry{}}
	m.reg.MustRegister(m.certs)
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strand_kafka_requests_total",
		Help: "Kafka requests handled, by API and by the first error code in the response (NONE if none).",
	}, []string{"api", "error"})
	m.requestLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strand_kafka_request_seconds",
		Help:    "Time from a request being read to its response being written.",
		Buckets: latencyBuckets,
	}, []string{"api"})
	m.produceBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "strand_produce_request_bytes_total",
		Help: "Bytes of Produce requests received.",
	})
	m.fetchBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "strand_fetch_response_bytes_total",
		Help: "Bytes of Fetch responses sent.",
	})
	m.connsClosed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strand_kafka_connections_closed_total",
		Help: "Kafka connections closed, by reason.",
	}, []string{"reason"})
	m.connsOpened = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strand_kafka_connections_opened_total",
		Help: "Kafka connections taken (past the connection limits), by listener.",
	}, []string{"listener"})
	objRequests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strand_objstore_requests_total",
		Help: "Object store requests, by operation and result (ok or error; error includes not-found and put-if-absent losing to an existing object).",
	}, []string{"op", "result"})
	objLatency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strand_objstore_request_seconds",
		Help:    "Latency of object store requests, by operation, failed ones included.",
		Buckets: latencyBuckets,
	}, []string{"op"})
	objBytes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strand_objstore_bytes_total",
		Help: "Bytes written (put) or read (get) from the object store, by operation.",
	}, []string{"op"})
	for i, op := range objstore.Ops {
		o := &m.objOps[i]
		o.ok = objRequests.WithLabelValues(op.String(), "ok")
		o.failed = objRequests.WithLabelValues(op.String(), "error")
		o.latency = objLatency.WithLabelValues(op.String())
		o.bytes = objBytes.WithLabelValues(op.String())
	}
	m.flushBytes = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "strand_flush_bytes",
		Help:    "Size of each data object written by the produce path.",
		Buckets: prometheus.ExponentialBuckets(1024, 4, 10),
	})
	m.flushLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "strand_flush_seconds",
		Help:    "Time from a flush being cut to its commit being applied locally.",
		Buckets: latencyBuckets,
	})
	m.uploadHedges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strand_produce_upload_hedges_total",
		Help: "Data object uploads hedged with a second PUT under a new key, by which attempt was committed (won: the hedge's).",
	}, []string{"result"})
	m.logAppend = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "strand_log_append_seconds",
		Help:    "Latency of appends to the shared log.",
		Buckets: latencyBuckets,
	})
	m.logAppendErrs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "strand_log_append_errors_total",
		Help: "Appends to the shared log that returned an error.",
	})
	m.logRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strand_log_requests_total",
		Help: "Operations this agent sent the shared log's backends, by backend (the segment's URL scheme: file, postgres, etcd, dynamodb, s3) and op (append, check_tail, read_next, tail_moved, wait_tail, seal, prefix_trim, chain_get, chain_cas). On s3 a check_tail is a LIST and a GET, a read_next a LIST and a GET per entry, a tail_moved one GET; on dynamodb each is about one request.",
	}, []string{"backend", "op"})
	m.fetchWakeups = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "strand_fetch_long_poll_wakeups_total",
		Help: "Times apply woke a long-polling Fetch because one of its partitions changed.",
	})
	m.fetchRechecked = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "strand_fetch_long_poll_partitions_rechecked_total",
		Help: "Partitions long-polling Fetches read again on their wake-ups.",
	})
	m.throttled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strand_kafka_quota_throttled_requests_total",
		Help: "Requests after which a client quota throttled the client, by API.",
	}, []string{"api"})
	m.throttleSeconds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strand_kafka_quota_throttle_seconds_total",
		Help: "Throttle time client quotas gave clients, by the API of the request that broke the quota.",
	}, []string{"api"})
	m.snapGCManifests = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "strand_snapshot_gc_manifests_deleted_total",
		Help: "Metadata snapshot manifests deleted by this agent's snapshot GC (older than the newest --snapshot-keep).",
	})
	m.snapGCFiles = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "strand_snapshot_gc_files_deleted_total",
		Help: "Metadata snapshot files deleted by this agent's snapshot GC because no kept snapshot names them.",
	})
	m.snapGCBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "strand_snapshot_gc_bytes_deleted_total",
		Help: "Bytes of the metadata snapshot files deleted by this agent's snapshot GC.",
	})
	// Series that exist from the start, so a rate over them is 0, not
	// absent, until the first event (and the metrics reference sees
	// them): a hedge's outcomes, byte-rate quotas' APIs, a clean close.
	for _, r := range []string{"won", "lost"} {
		m.uploadHedges.WithLabelValues(r)
	}
	for _, api := range []string{apiName(0), apiName(1)} {
		m.throttled.WithLabelValues(api)
		m.throttleSeconds.WithLabelValues(api)
	}
	m.connsClosed.WithLabelValues("client")
	m.reg.MustRegister(m.snapGCManifests, m.snapGCFiles, m.snapGCBytes)
	m.reg.MustRegister(objRequests, objLatency, objBytes, m.connsOpened, buildInfo())
	m.reg.MustRegister(m.requests, m.requestLatency, m.produceBytes, m.fetchBytes,
		m.connsClosed, m.flushBytes, m.flushLatency, m.uploadHedges, m.logAppend, m.logAppendErrs, m.logRequests,
		m.fetchWakeups, m.fetchRechecked, m.throttled, m.throttleSeconds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "strand_process_resident_memory_peak_bytes",
			Help: "Highest resident set size of the process so far (Linux VmHWM; 0 where unknown): what the memory budget bounds.",
		}, peakRSS))
	return m
}

// objstoreDone feeds the object store metrics (objstore.WithTiming).
func (m *metrics) objstoreDone(op objstore.Op, d time.Duration, bytes int64, err error) {
	if int(op) < 0 || int(op) >= len(m.objOps) {
		return
	}
	o := &m.objOps[op]
	if err != nil {
		o.failed.Inc()
	} else {
		o.ok.Inc()
	}
	o.latency.Observe(d.Seconds())
	o.bytes.Add(float64(bytes))
}

// buildInfo is strand_build_info: 1, labelled with the module version
// and VCS revision the binary was built from ("(devel)" and "" for a
// test or a plain `go build` outside a module version) and the Go
// version, so a dashboard can tell which agents run which build.
func buildInfo() prometheus.Collector {
	version, revision := buildVersion()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "strand_build_info",
		Help:        "Always 1; the labels say which build this agent runs: module version, VCS revision, Go version.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// buildVersion is the module version and VCS revision the binary was
// built from, as strand_build_info labels them.
func buildVersion() (version, revision string) {
	version = "(unknown)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	return version, revision
}

// apiName is the label for an API key: kmsg's name, or the number.
func apiName(key int16) string {
	if name := kmsg.NameForKey(key); name != "" {
		return name
	}
	return strconv.Itoa(int(key))
}

// kafkaObserver feeds request and connection metrics.
type kafkaObserver struct{ m *metrics }

func (o kafkaObserver) RequestDone(c *kafka.Conn, st kafka.RequestStats) {
	api := apiName(st.Key)
	code := "NONE"
	switch {
	case st.Err != nil:
		code = "CONNECTION_CLOSED"
	case st.ErrorCode != 0:
		code = errorName(st.ErrorCode)
	}
	o.m.requests.WithLabelValues(api, code).Inc()
	if o.m.zones != nil {
		o.m.zones.request(c.Zone(), st.BytesIn, st.BytesOut)
	}
	o.m.requestLatency.WithLabelValues(api).Observe(st.Latency.Seconds())
	if st.Throttle > 0 {
		o.m.throttled.WithLabelValues(api).Inc()
		o.m.throttleSeconds.WithLabelValues(api).Add(st.Throttle.Seconds())
	}
	switch st.Key {
	case 0:
		o.m.produceBytes.Add(float64(st.BytesIn))
	case 1:
		o.m.fetchBytes.Add(float64(st.BytesOut))
	}
}

var _ kafka.WaitObserver = kafkaObserver{}

func (o kafkaObserver) FetchWaited(_ *kafka.Conn, st kafka.WaitStats) {
	o.m.fetchWakeups.Add(float64(st.Wakeups))
	o.m.fetchRechecked.Add(float64(st.PartitionsRechecked))
}

var (
	_ kafka.ConnOpenObserver = kafkaObserver{}
	_ kafka.TopicObserver    = kafkaObserver{}
)

func (o kafkaObserver) ConnOpened(c *kafka.Conn) {
	o.m.connsOpened.WithLabelValues(c.Listener().Name).Inc()
}

func (o kafkaObserver) TopicProduced(id meta.TopicID, bytes, records int64) {
	o.m.topics.produced(id, bytes, records)
}

func (o kafkaObserver) TopicFetched(id meta.TopicID, bytes, records int64) {
	o.m.topics.fetched(id, bytes, records)
}

func (o kafkaObserver) ConnClosed(_ *kafka.Conn, reason error) {
	label := "client"
	if reason != nil {
		label = kafka.CloseReason(reason)
	}
	o.m.connsClosed.WithLabelValues(label).Inc()
}

// cacheCollector exports the read cache's counters: how often reads
// find their bytes there, and how many of its GETs read ahead of a
// consumer catching up.
type cacheCollector struct {
	c                    *fetch.Cache
	lookups, bytes, gets *prometheus.Desc
}

func newCacheCollector(c *fetch.Cache) *cacheCollector {
	return &cacheCollector{
		c: c,
		lookups: prometheus.NewDesc("strand_fetch_cache_lookups_total",
			"Read cache lookups, by result: hit (cached), miss (one GET) or joined (waited for another read's GET).", []string{"result"}, nil),
		bytes: prometheus.NewDesc("strand_fetch_cache_bytes", "Bytes the read cache holds.", nil, nil),
		gets: prometheus.NewDesc("strand_fetch_read_ahead_gets_total",
			"Object store GETs made to read ahead of consumers catching up on data the read cache did not hold.", nil, nil),
	}
}

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lookups
	ch <- c.bytes
	ch <- c.gets
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.c.Stats()
	ch <- prometheus.MustNewConstMetric(c.lookups, prometheus.CounterValue, float64(st.Hits), "hit")
	ch <- prometheus.MustNewConstMetric(c.lookups, prometheus.CounterValue, float64(st.Misses-st.ReadAheads), "miss")
	ch <- prometheus.MustNewConstMetric(c.lookups, prometheus.CounterValue, float64(st.Coalesced), "joined")
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(c.gets, prometheus.CounterValue, float64(st.ReadAheads))
}

// damageCollector exports the fetch path's damaged-object counts.
type damageCollector struct {
	d       *fetch.DamageLog
	objects *prometheus.Desc
	reads   *prometheus.Desc
}

func newDamageCollector(d *fetch.DamageLog) *damageCollector {
	return &damageCollector{
		d: d,
		objects: prometheus.NewDesc("strand_fetch_damaged_objects_total",
			"Damaged data objects met by reads and storage verification, each counted once while remembered, by kind: corrupt (a batch failing its framing or CRC-32C check, or disagreeing with the index) or missing (not in the object store).",
			[]string{"kind"}, nil),
		reads: prometheus.NewDesc("strand_fetch_damaged_reads_total",
			"Partition reads that failed on a damaged data object, by kind (corrupt or missing).",
			[]string{"kind"}, nil),
	}
}

func (c *damageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.objects
	ch <- c.reads
}

func (c *damageCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.d.Stats()
	for _, k := range []fetch.DamageKind{fetch.DamageCorrupt, fetch.DamageMissing} {
		ch <- prometheus.MustNewConstMetric(c.objects, prometheus.CounterValue, float64(st.Objects[k]), k.String())
		ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(st.Reads[k]), k.String())
	}
}

// countLogRequest counts one operation sent to a shared log backend
// (logurl.Options.Count).
func (m *metrics) countLogRequest(backend, op string) {
	m.logRequests.WithLabelValues(backend, op).Inc()
}

// timedLog measures appends to the shared log and tells appendHealth how
// they went. It embeds the VirtualLog so the replica still finds its
// WaitTail.
type timedLog struct {
	*sharedlog.VirtualLog
	m      *metrics
	health *appendHealth
}

func (l timedLog) Append(ctx context.Context, entry []byte) (sharedlog.Pos, error) {
	start := time.Now()
	pos, err := l.VirtualLog.Append(ctx, entry)
	l.m.logAppend.Observe(time.Since(start).Seconds())
	if err != nil {
		l.m.logAppendErrs.Inc()
	}
	l.health.record(err)
	return pos, err
}

// produceObserver feeds flush metrics.
type produceObserver struct{ m *metrics }

func (o produceObserver) FlushCut(batchBytes, batches, calls int) {
	o.m.flushBytes.Observe(float64(batchBytes))
}
func (o produceObserver) UploadDone(objectBytes, attempts int, d time.Duration, err error) {}
func (o produceObserver) CommitDone(objects int, d time.Duration, err error)               {}
func (o produceObserver) FlushDone(batchBytes int, d time.Duration, err error) {
	o.m.flushLatency.Observe(d.Seconds())
}
func (o produceObserver) UploadHedged(won bool) {
	result := "lost"
	if won {
		result = "won"
	}
	o.m.uploadHedges.WithLabelValues(result).Inc()
}

var _ produce.HedgeObserver = produceObserver{}

// registerReplicaMetrics exports the applied position and the apply
// lag, and the per-topic traffic, whose names the replica resolves.
// registerClockMetrics registers the clock guard's gauges
// (clockskew.go).
func (a *Agent) registerClockMetrics() {
	a.metrics.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "strand_clock_skew_seconds",
			Help: "This agent's clock minus the log clock, measured after its newest lease renewal applied.",
		}, a.clock.skewSeconds),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "strand_clock_skewed",
			Help: "1 while this agent's clock is further from the log clock than --max-clock-skew: it decides nothing by time and is not ready.",
		}, a.clock.skewedGauge),
	)
}

func (a *Agent) registerReplicaMetrics() {
	a.metrics.topics.view = a.replica.View
	a.metrics.reg.MustRegister(a.metrics.topics)
	a.metrics.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "strand_meta_apply_lag_seconds",
			Help: "How long this agent's metadata copy has been behind the newest log entry it knows of (0 when caught up), as Kafka's replica lag time.",
		}, func() float64 { return a.replica.ApplyLag().Seconds() }),
	)
	a.metrics.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "strand_meta_applied_position",
			Help: "Next log position this agent's replica will apply.",
		}, func() float64 { return float64(a.replica.NextToApply()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "strand_meta_apply_lag_entries",
			Help: "Log entries appended but not yet applied by this agent (tail minus applied, read at scrape time).",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			tail, _, err := a.log.CheckTail(ctx)
			if err != nil {
				return -1
			}
			applied := a.replica.NextToApply()
			if tail < applied {
				return 0
			}
			return float64(tail - applied)
		}),
	)
}

// errorName is the Kafka name of an error code, e.g. NOT_COORDINATOR.
func errorName(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return ke.Message
		}
	}
	return strconv.Itoa(int(code))
}
