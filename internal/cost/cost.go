// Package cost owns the cost report: it turns what an agent measured
// (object store requests, shared-log requests, bytes kept, bytes that
// crossed zones) into dollars per GB ingested, with a price table a user
// can edit (prices.yaml, list prices by default), beside what Kafka with
// three replicas costs for the same workload by the usual formula. Every
// term says which counter it came from, so a reader can check it.
//
// Compute is left out on both sides: the comparison assumes equal
// compute, as the numbers it is checked against do.
package cost

import (
	"bytes"
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed prices.yaml
var defaultPrices []byte

// Prices is a price table, in dollars.
type Prices struct {
	Region     string `yaml:"region"`
	S3Standard struct {
		PutPer1000     float64 `yaml:"put_per_1000"`
		GetPer1000     float64 `yaml:"get_per_1000"`
		StorageGBMonth float64 `yaml:"storage_gb_month"`
	} `yaml:"s3_standard"`
	S3Express struct {
		PutPer1000     float64 `yaml:"put_per_1000"`
		GetPer1000     float64 `yaml:"get_per_1000"`
		StorageGBMonth float64 `yaml:"storage_gb_month"`
		UploadPerGB    float64 `yaml:"upload_per_gb"`
		RetrievalPerGB float64 `yaml:"retrieval_per_gb"`
	} `yaml:"s3_express"`
	DynamoDB struct {
		WritePerMillion float64 `yaml:"write_per_million"`
		ReadPerMillion  float64 `yaml:"read_per_million"`
	} `yaml:"dynamodb"`
	CrossZonePerGB       float64 `yaml:"cross_zone_per_gb"`
	KafkaDiskGBMonth     float64 `yaml:"kafka_disk_gb_month"`
	KafkaDiskUtilization float64 `yaml:"kafka_disk_utilization"`
}

// DefaultPrices is the table shipped in prices.yaml.
func DefaultPrices() Prices {
	p, err := ParsePrices(defaultPrices)
	if err != nil {
		panic("cost: the shipped prices.yaml: " + err.Error())
	}
	return p
}

// DefaultPricesYAML is prices.yaml, for a user to copy and edit.
func DefaultPricesYAML() []byte { return append([]byte(nil), defaultPrices...) }

// LoadPrices reads a price table from path; "" is the default table.
func LoadPrices(path string) (Prices, error) {
	if path == "" {
		return DefaultPrices(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Prices{}, err
	}
	p, err := ParsePrices(b)
	if err != nil {
		return Prices{}, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// ParsePrices parses a price table, refusing unknown fields (a typo
// would otherwise price something at 0) and negative prices.
func ParsePrices(b []byte) (Prices, error) {
	var p Prices
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return Prices{}, fmt.Errorf("price table: %w", err)
	}
	for _, v := range []float64{p.S3Standard.PutPer1000, p.S3Standard.GetPer1000, p.S3Standard.StorageGBMonth,
		p.S3Express.PutPer1000, p.S3Express.GetPer1000, p.S3Express.StorageGBMonth, p.S3Express.UploadPerGB, p.S3Express.RetrievalPerGB,
		p.DynamoDB.WritePerMillion, p.DynamoDB.ReadPerMillion, p.CrossZonePerGB, p.KafkaDiskGBMonth} {
		if v < 0 {
			return Prices{}, errors.New("price table: a price is negative")
		}
	}
	if p.KafkaDiskUtilization <= 0 || p.KafkaDiskUtilization > 1 {
		return Prices{}, fmt.Errorf("price table: kafka_disk_utilization %v: want a share in (0, 1]", p.KafkaDiskUtilization)
	}
	return p, nil
}

// Workload is what is being priced.
type Workload struct {
	// FanOut is how many times each byte is consumed (consumer groups).
	FanOut float64
	// RetentionDays is how long data is kept.
	RetentionDays float64
	// Zones is the availability zones clients and brokers spread over.
	Zones int
}

// Validate reports the first invalid field.
func (w Workload) Validate() error {
	if w.FanOut < 0 || w.RetentionDays < 0 || w.Zones < 1 {
		return fmt.Errorf("cost: workload %+v: fan-out and retention must not be negative, zones at least 1", w)
	}
	return nil
}

// Measured is what an agent (or a cluster, summed) counted over a
// window.
type Measured struct {
	// IngestBytes is the record bytes produced.
	IngestBytes float64
	// Puts and Gets are object store requests (strand_objstore_requests_total).
	Puts, Gets float64
	// LogBackend is the shared log's backend (file, postgres, etcd,
	// dynamodb, s3), LogWrites and LogReads its requests: priced as
	// that backend bills them, 0 for those billed by the machine.
	LogBackend          string
	LogWrites, LogReads float64
	LogCounter          string
	// CrossZoneBytes is the client bytes that crossed zones, and
	// CrossZoneCounter the counter it came from ("" if not measured).
	CrossZoneBytes   float64
	CrossZoneCounter string
	// ExpressPuts and ExpressPutBytes are the low-latency tier's writes
	// to its zone buckets (strand_express_puts_total and
	// strand_express_put_bytes_total), priced as S3 Express One Zone
	// and not counted in Puts; ExpressHeldMinutes is how long a zone
	// holds a flush before the gc deletes it (compaction's
	// ExpressMaxLag and interval plus the gc's delete delay).
	ExpressPuts, ExpressPutBytes float64
	ExpressHeldMinutes           float64
	// StoredPerIngested is the bytes kept per byte ingested (1 unless
	// compaction or compression change it); 0 means 1.
	StoredPerIngested float64
}

// Term is one line of a report: a cost per GB ingested and where its
// quantity came from.
type Term struct {
	Name    string
	Counter string
	// PerGB is the quantity per GB ingested, in Unit.
	PerGB float64
	Unit  string
	// Dollars is the cost per GB ingested.
	Dollars float64
}

// Report is a cost per GB ingested, term by term.
type Report struct {
	Title string
	Terms []Term
}

// Total is the sum of the terms.
func (r Report) Total() float64 {
	var t float64
	for _, x := range r.Terms {
		t += x.Dollars
	}
	return t
}

const (
	gb          = 1e9
	daysInMonth = 365.25 / 12
)

// Strand prices what an agent measured.
func Strand(p Prices, w Workload, m Measured) (Report, error) {
	if err := w.Validate(); err != nil {
		return Report{}, err
	}
	if m.IngestBytes <= 0 {
		return Report{}, errors.New("cost: nothing was ingested in the window")
	}
	perGB := gb / m.IngestBytes
	r := Report{Title: "Strand"}
	r.add("object store PUTs", `strand_objstore_requests_total{op="put"}`, m.Puts*perGB, "PUTs", p.S3Standard.PutPer1000/1000)
	r.add("object store GETs", `strand_objstore_requests_total{op="get"}`, m.Gets*perGB, "GETs", p.S3Standard.GetPer1000/1000)
	switch m.LogBackend {
	case "s3":
		r.add("shared log writes (S3)", m.LogCounter, m.LogWrites*perGB, "PUTs", p.S3Standard.PutPer1000/1000)
		r.add("shared log reads (S3)", m.LogCounter, m.LogReads*perGB, "GETs/LISTs", p.S3Standard.GetPer1000/1000)
	case "dynamodb":
		r.add("shared log writes (DynamoDB)", m.LogCounter, m.LogWrites*perGB, "write requests", p.DynamoDB.WritePerMillion/1e6)
		r.add("shared log reads (DynamoDB)", m.LogCounter, m.LogReads*perGB, "read requests", p.DynamoDB.ReadPerMillion/1e6)
	default:
		// file, postgres, etcd: the machine they run on bills them,
		// compute the report leaves out.
		r.add("shared log ("+cmp.Or(m.LogBackend, "file")+", on machines)", m.LogCounter, m.LogWrites*perGB, "writes", 0)
	}
	if m.ExpressPuts > 0 {
		// S3 Express One Zone bills every uploaded byte as well as the
		// request, and storage by the byte-hour: a flush held for
		// minutes costs minutes (AWS S3 FAQ, S3 Express One Zone
		// pricing examples).
		copies := m.ExpressPutBytes / m.IngestBytes
		r.add("S3 Express PUTs (zone buckets)", "strand_express_puts_total", m.ExpressPuts*perGB, "PUTs", p.S3Express.PutPer1000/1000)
		r.add("S3 Express upload", "strand_express_put_bytes_total", copies, "GB", p.S3Express.UploadPerGB)
		r.add("S3 Express storage (held until compacted)", "strand_express_put_bytes_total x held minutes",
			copies*m.ExpressHeldMinutes/(daysInMonth*24*60), "GB-months", p.S3Express.StorageGBMonth)
	}
	stored := m.StoredPerIngested
	if stored == 0 {
		stored = 1
	}
	r.add("storage (S3 Standard, one copy)", "retention", stored*w.RetentionDays/daysInMonth, "GB-months", p.S3Standard.StorageGBMonth)
	counter := m.CrossZoneCounter
	if counter == "" {
		counter = "not measured (one zone)"
	}
	r.add("cross-zone transfer", counter, m.CrossZoneBytes*perGB/gb, "GB", p.CrossZonePerGB)
	return r, nil
}

// Kafka prices the same workload on Kafka with three replicas, each in
// its own zone, clients spread evenly over zones and leaders: a
// producer's bytes cross to a leader in another zone (Zones-1)/Zones of
// the time, every byte is copied to the two followers in other zones,
// and each consumer group reads across zones (Zones-1)/Zones of the
// time, or never with follower fetching (KIP-392). Disks hold three
// copies for the retention, kafka_disk_utilization full.
func Kafka(p Prices, w Workload, followerFetching bool) (Report, error) {
	if err := w.Validate(); err != nil {
		return Report{}, err
	}
	const rf = 3
	z := float64(w.Zones)
	away := (z - 1) / z
	r := Report{Title: "Kafka, RF=3"}
	if followerFetching {
		r.Title += ", follower fetching"
	}
	r.add("producers to leaders across zones", "formula", away, "GB", p.CrossZonePerGB)
	r.add("replication to followers in other zones", "formula", min(rf-1, z-1), "GB", p.CrossZonePerGB)
	consumers := w.FanOut * away
	if followerFetching {
		consumers = 0
	}
	r.add("consumers across zones", "formula", consumers, "GB", p.CrossZonePerGB)
	r.add("disks (three copies)", "formula", rf*w.RetentionDays/daysInMonth/p.KafkaDiskUtilization, "GB-months", p.KafkaDiskGBMonth)
	return r, nil
}

func (r *Report) add(name, counter string, perGB float64, unit string, price float64) {
	r.Terms = append(r.Terms, Term{Name: name, Counter: counter, PerGB: perGB, Unit: unit, Dollars: perGB * price})
}

// Format is the report as a table: one line per term, then the total.
func (r Report) Format() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: $%.4f per GB ingested\n", r.Title, r.Total())
	for _, t := range r.Terms {
		fmt.Fprintf(&b, "  %-42s $%.5f  (%.4g %s per GB; %s)\n", t.Name, t.Dollars, t.PerGB, t.Unit, t.Counter)
	}
	return b.String()
}
