package cost

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var fanOut3 = Workload{FanOut: 3, RetentionDays: 7, Zones: 3}

// Kafka RF=3 at list prices, fan-out 3, 7 days, 3 zones: the issue's
// model puts it at $0.175-0.215 per GB ingested; follower fetching saves
// the consumers' crossings.
func TestKafkaFormula(t *testing.T) {
	p := DefaultPrices()
	k, err := Kafka(p, fanOut3, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := k.Total(); got < 0.175 || got > 0.215 {
		t.Errorf("Kafka RF=3: $%.4f per GB, want 0.175-0.215\n%s", got, k.Format())
	}
	ff, err := Kafka(p, fanOut3, true)
	if err != nil {
		t.Fatal(err)
	}
	// Three groups, each crossing 2/3 of the time at $0.02.
	if saved := k.Total() - ff.Total(); math.Abs(saved-3*2.0/3*0.02) > 1e-9 {
		t.Errorf("follower fetching saves $%.5f per GB, want $0.04", saved)
	}
}

// Each of Strand's terms is its counter per GB ingested times its
// price.
func TestStrandTerms(t *testing.T) {
	p := DefaultPrices()
	// A minute at 50 MB/s: 3 GB, 6 PUTs a second, a backend that bills
	// requests, 1% of the bytes across zones.
	m := Measured{IngestBytes: 3e9, Puts: 360, Gets: 30, LogBackend: "dynamodb", LogWrites: 345, LogReads: 12,
		LogCounter: "strand_log_requests_total", CrossZoneBytes: 3e7, CrossZoneCounter: "strand_zone_bytes_total"}
	r, err := Strand(p, fanOut3, m)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"object store PUTs":               120 * 0.005 / 1000,
		"object store GETs":               10 * 0.0004 / 1000,
		"shared log writes (DynamoDB)":    115 * 0.625 / 1e6,
		"shared log reads (DynamoDB)":     4 * 0.125 / 1e6,
		"storage (S3 Standard, one copy)": 7 / (365.25 / 12) * 0.023,
		"cross-zone transfer":             0.01 * 0.02,
	}
	for _, term := range r.Terms {
		w, ok := want[term.Name]
		if !ok {
			t.Errorf("unexpected term %q", term.Name)
			continue
		}
		if math.Abs(term.Dollars-w) > 1e-12 {
			t.Errorf("%s: $%g, want $%g", term.Name, term.Dollars, w)
		}
		delete(want, term.Name)
	}
	for name := range want {
		t.Errorf("no term %q", name)
	}
	if r.Total() > 0.02 {
		t.Errorf("$%.4f per GB, want at most $0.02:\n%s", r.Total(), r.Format())
	}
	if !strings.Contains(r.Format(), "strand_zone_bytes_total") {
		t.Errorf("the report does not name its counters:\n%s", r.Format())
	}
	if _, err := Strand(p, fanOut3, Measured{}); err == nil {
		t.Error("a window with nothing ingested was priced")
	}
}

func TestPriceTable(t *testing.T) {
	dir := t.TempDir()
	edited := strings.Replace(string(DefaultPricesYAML()), "cross_zone_per_gb: 0.02", "cross_zone_per_gb: 0.01", 1)
	path := filepath.Join(dir, "prices.yaml")
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPrices(path)
	if err != nil || p.CrossZonePerGB != 0.01 || p.S3Standard.PutPer1000 != 0.005 {
		t.Fatalf("edited table: %+v, %v", p, err)
	}
	for _, bad := range []string{
		"cross_zone_per_gib: 0.02\nkafka_disk_utilization: 0.5\n", // a typo would price at 0
		"cross_zone_per_gb: -1\nkafka_disk_utilization: 0.5\n",
		"kafka_disk_utilization: 0\n",
	} {
		if _, err := ParsePrices([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// The tier's writes are priced as S3 Express One Zone (request, upload
// per GB, minutes of storage), apart from the main store's PUTs.
func TestStrandPricesExpressTier(t *testing.T) {
	p := DefaultPrices()
	m := Measured{IngestBytes: 10 * gb, Puts: 100, ExpressPuts: 10_000, ExpressPutBytes: 21 * gb, ExpressHeldMinutes: 3}
	r, err := Strand(p, Workload{FanOut: 1, RetentionDays: 1, Zones: 3}, m)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"object store PUTs":                         10 * p.S3Standard.PutPer1000 / 1000,
		"S3 Express PUTs (zone buckets)":            1000 * p.S3Express.PutPer1000 / 1000,
		"S3 Express upload":                         2.1 * p.S3Express.UploadPerGB,
		"S3 Express storage (held until compacted)": 2.1 * 3 / (daysInMonth * 24 * 60) * p.S3Express.StorageGBMonth,
	}
	for _, term := range r.Terms {
		w, ok := want[term.Name]
		if !ok {
			continue
		}
		delete(want, term.Name)
		if diff := term.Dollars - w; diff > 1e-12 || diff < -1e-12 {
			t.Errorf("%s: $%g per GB, want $%g", term.Name, term.Dollars, w)
		}
	}
	if len(want) > 0 {
		t.Errorf("terms missing: %v", want)
	}
	// Without the tier there are no S3 Express terms.
	r, _ = Strand(p, Workload{FanOut: 1, RetentionDays: 1, Zones: 3}, Measured{IngestBytes: gb, Puts: 1})
	for _, term := range r.Terms {
		if strings.HasPrefix(term.Name, "S3 Express") {
			t.Errorf("term %q without the tier", term.Name)
		}
	}
}
