package agent

import (
	"os"
	"testing"
)

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "512MiB", want: 512 << 20},
		{in: "1GiB", want: 1 << 30},
		{in: "4096", want: 4096},
		{in: "10B", want: 10},
		{in: "3KiB", want: 3 << 10},
		{in: "1MB", bad: true},
		{in: "-1MiB", bad: true},
		{in: "lots", bad: true},
		{in: "99999999999TiB", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d (error: %v)", tt.in, got, err, tt.want, tt.bad)
		}
		if !tt.bad {
			if back, _ := ParseBytes(FormatBytes(got)); back != got {
				t.Errorf("%q: %d formats as %q, which parses as %d", tt.in, got, FormatBytes(got), back)
			}
		}
	}
}

// TestSplitMemory checks that the shares of a budget fit in it with the
// part Pebble holds outside the Go heap, and that the largest request
// fits the request bytes.
func TestSplitMemory(t *testing.T) {
	for _, budget := range []int64{minMemoryBudget, DefaultMemoryBudget, 8 << 30} {
		s := SplitMemory(budget)
		shares := s.ReadCache + s.QueuedRequestBytes + int64(s.ProduceBuffer) + s.HeldResponses
		if shares+offHeapBytes > budget || shares > s.GoMemoryLimit || s.GoMemoryLimit+offHeapBytes > budget {
			t.Errorf("budget %s: shares %s plus %s off the heap; Go limit %s",
				FormatBytes(budget), FormatBytes(shares), FormatBytes(offHeapBytes), FormatBytes(s.GoMemoryLimit))
		}
		// Room for frames still arriving besides one largest request,
		// as kafka.Config asks for fair sharing of request memory.
		if 2*int64(s.MaxRequestBytes) > s.QueuedRequestBytes || s.MaxRequestBytes <= 0 {
			t.Errorf("budget %s: largest request %d, request bytes %d", FormatBytes(budget), s.MaxRequestBytes, s.QueuedRequestBytes)
		}
	}
}

func TestPeakRSS(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc/self/status")
	}
	// The peak is at least what the process holds now.
	var buf [8 << 20]byte
	for i := range buf {
		buf[i] = byte(i)
	}
	if p := peakRSS(); p < float64(len(buf)) {
		t.Fatalf("peak RSS %.0f bytes, below the %d touched", p, len(buf))
	}
	_ = buf[len(buf)-1]
}
