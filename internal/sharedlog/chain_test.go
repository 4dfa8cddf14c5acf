package sharedlog

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func threeSegments() Chain {
	return Chain{
		Version: 7,
		Segments: []Segment{
			{Start: 10, End: 20, Sealed: true, URL: "mem://a"},
			{Start: 20, End: 20, Sealed: true, URL: "mem://b"},
			{Start: 20, URL: "file:seg-00000007"},
		},
		TrimPoint: 12,
	}
}

func TestChainValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(c *Chain)
		valid bool
	}{
		{"ok", func(*Chain) {}, true},
		{"empty", func(c *Chain) { *c = Chain{} }, true},
		{"empty with version", func(c *Chain) { *c = Chain{Version: 3} }, false},
		{"empty with trim point", func(c *Chain) { *c = Chain{TrimPoint: 3} }, false},
		{"version 0", func(c *Chain) { c.Version = 0 }, false},
		{"last sealed", func(c *Chain) { c.Segments[2].Sealed, c.Segments[2].End = true, 25 }, true},
		{"trim past sealed end", func(c *Chain) {
			c.Segments[2].Sealed, c.Segments[2].End = true, 25
			c.TrimPoint = 26
		}, false},
		{"trim into active", func(c *Chain) { c.TrimPoint = 1000 }, true},
		{"trim below first", func(c *Chain) { c.TrimPoint = 9 }, false},
		{"unsealed middle", func(c *Chain) { c.Segments[1].Sealed = false; c.Segments[1].End = 0 }, false},
		{"end before start", func(c *Chain) { c.Segments[0].End = 9 }, false},
		{"gap", func(c *Chain) { c.Segments[2].Start = 21 }, false},
		{"overlap", func(c *Chain) { c.Segments[1].Start = 19 }, false},
		{"unsealed with end", func(c *Chain) { c.Segments[2].End = 30 }, false},
		{"no url", func(c *Chain) { c.Segments[1].URL = "" }, false},
		{"long url", func(c *Chain) { c.Segments[1].URL = strings.Repeat("x", maxURLBytes+1) }, false},
		{"reused url", func(c *Chain) { c.Segments[2].URL = "mem://a" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := threeSegments().Clone()
			tt.edit(&c)
			err := c.Validate()
			if tt.valid && err != nil {
				t.Fatalf("Validate = %v, want nil", err)
			}
			if !tt.valid && !errors.Is(err, ErrInvalidChain) {
				t.Fatalf("Validate = %v, want ErrInvalidChain", err)
			}
			if _, err := EncodeChain(c); tt.valid != (err == nil) {
				t.Fatalf("EncodeChain error %v, valid %v", err, tt.valid)
			}
		})
	}
}

func TestChainRoundTrip(t *testing.T) {
	for _, c := range []Chain{{}, threeSegments(), {Version: 1, Segments: []Segment{{URL: "mem://x"}}}} {
		b, err := EncodeChain(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeChain(b)
		if err != nil {
			t.Fatalf("DecodeChain(%s): %v", b, err)
		}
		if got.Version != c.Version || got.TrimPoint != c.TrimPoint || len(got.Segments) != len(c.Segments) ||
			(len(c.Segments) > 0 && !reflect.DeepEqual(got.Segments, c.Segments)) {
			t.Fatalf("round trip of %+v gave %+v", c, got)
		}
	}
}

func TestDecodeChainRejects(t *testing.T) {
	tests := []struct{ name, in string }{
		{"not json", "chain"},
		{"no format", `{"version":1,"segments":[{"start":0,"url":"mem://a"}]}`},
		{"future format", `{"format":2,"version":1,"segments":[{"start":0,"url":"mem://a"}]}`},
		{"unknown field", `{"format":1,"version":1,"segments":[{"start":0,"url":"mem://a","kind":"x"}]}`},
		{"trailing data", `{"format":1,"version":1,"segments":[{"start":0,"url":"mem://a"}]} {}`},
		{"trailing bracket", `{"format":1,"version":1,"segments":[{"start":0,"url":"mem://a"}]}]`},
		{"negative position", `{"format":1,"version":1,"segments":[{"start":-1,"url":"mem://a"}]}`},
		{"fractional position", `{"format":1,"version":1,"segments":[{"start":1.5,"url":"mem://a"}]}`},
		{"position overflow", `{"format":1,"version":1,"segments":[{"start":18446744073709551616,"url":"mem://a"}]}`},
		{"invalid chain", `{"format":1,"version":1,"segments":[{"start":0,"url":""}]}`},
		{"too big", `{"format":1,"version":1,"segments":[{"start":0,"url":"` + strings.Repeat("a", MaxChainBytes) + `"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := DecodeChain([]byte(tt.in)); !errors.Is(err, ErrInvalidChain) {
				t.Fatalf("DecodeChain = %+v, %v; want ErrInvalidChain", c, err)
			}
		})
	}
}

func TestChainExtend(t *testing.T) {
	c := threeSegments()
	n, err := c.Extend(5, "mem://d")
	if err != nil {
		t.Fatal(err)
	}
	want := threeSegments()
	want.Version = 8
	want.Segments[2].Sealed, want.Segments[2].End = true, 25
	want.Segments = append(want.Segments, Segment{Start: 25, URL: "mem://d"})
	if !reflect.DeepEqual(n, want) {
		t.Fatalf("Extend = %+v, want %+v", n, want)
	}
	if !reflect.DeepEqual(c, threeSegments()) {
		t.Fatalf("Extend changed its receiver: %+v", c)
	}
	if _, err := n.Extend(0, "mem://a"); !errors.Is(err, ErrInvalidChain) {
		t.Fatalf("Extend to a used URL = %v, want ErrInvalidChain", err)
	}
	if _, err := (Chain{}).Extend(0, "mem://a"); !errors.Is(err, ErrInvalidChain) {
		t.Fatalf("Extend of the empty chain = %v, want ErrInvalidChain", err)
	}
	if _, err := want.Extend(0, "mem://e"); err != nil {
		t.Fatal(err)
	}
	sealedLog := want.Clone()
	sealedLog.Segments[3].Sealed, sealedLog.Segments[3].End = true, 25
	if _, err := sealedLog.Extend(0, "mem://e"); !errors.Is(err, ErrSealed) {
		t.Fatalf("Extend of a sealed log = %v, want ErrSealed", err)
	}
}

func TestChainSegmentFor(t *testing.T) {
	c := threeSegments()
	tests := []struct {
		p    Pos
		want int
		ok   bool
	}{
		{9, 0, false}, {10, 0, true}, {19, 0, true}, {20, 2, true}, {1 << 40, 2, true},
	}
	for _, tt := range tests {
		if i, ok := c.segmentFor(tt.p); i != tt.want || ok != tt.ok {
			t.Errorf("segmentFor(%d) = %d, %v; want %d, %v", tt.p, i, ok, tt.want, tt.ok)
		}
	}
	c.Segments[2].Sealed, c.Segments[2].End = true, 22
	if _, ok := c.segmentFor(22); ok {
		t.Errorf("segmentFor(22) found a segment past a sealed log's end")
	}
}

func TestDefaultNextURL(t *testing.T) {
	tests := []struct{ active, want string }{
		{"file:seg-00000000", "file:seg-00000004"},
		{"file:///var/log/seg-00000003", "file:///var/log/seg-00000004"},
		{"file:///var/log", "file:///var/log-00000004"},
		{"mem://test", "mem://test/seg-00000004"},
		{"mem://test/x7?opt=1", "mem://test/x00000004?opt=1"},
		{"pg://host:5432/db", "pg://host:5432/db-00000004"},
	}
	for _, tt := range tests {
		t.Run(tt.active, func(t *testing.T) {
			c := Chain{Version: 3, Segments: []Segment{{URL: tt.active}}}
			got, err := DefaultNextURL(c)
			if err != nil || got != tt.want {
				t.Fatalf("DefaultNextURL = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	taken := Chain{Version: 3, Segments: []Segment{
		{End: 1, Sealed: true, URL: "mem://x/seg-00000004"}, {Start: 1, URL: "mem://x/seg-1"},
	}}
	if _, err := DefaultNextURL(taken); !errors.Is(err, ErrInvalidChain) {
		t.Fatalf("DefaultNextURL with the name taken = %v, want ErrInvalidChain", err)
	}
}

func FuzzDecodeChain(f *testing.F) {
	for _, c := range []Chain{{}, threeSegments()} {
		b, err := EncodeChain(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"format":1,"version":1,"segments":[{"start":5,"url":"mem://a"}],"trim_point":5}`))
	f.Add([]byte(`{"format":1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeChain(b)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("DecodeChain returned an invalid chain: %v", err)
		}
		b2, err := EncodeChain(c)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		c2, err := DecodeChain(b2)
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip: %+v, %v; want %+v", c2, err, c)
		}
	})
}
