package bench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
)

func TestWriteSVGIsWellFormed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		plot      Plot
		polylines int
	}{
		{
			name: "latency over time, log scale, with marker and escapes",
			plot: Plot{
				Title: `p99 < 5 ms & "fast"`, XLabel: "seconds", YLabel: "ms", LogY: true, MarkX: []float64{2},
				Series: []Series{
					{Name: "produce p50", Points: []Point{{1, 0.5}, {2, 0.7}, {3, 0.6}}},
					{Name: "produce p99", Points: []Point{{1, 5}, {2, 0}, {3, math.NaN()}, {4, 900}}},
					{Name: "kfake <p99>", Points: []Point{{1, 3}, {2, 4}}, Dashed: true, Color: "#123456"},
				},
			},
			polylines: 3,
		},
		{
			name:      "no points at all",
			plot:      Plot{Title: "empty", LogY: true, Series: []Series{{Name: "nothing"}}},
			polylines: 0,
		},
		{
			name:      "linear axis, one point",
			plot:      Plot{Title: "one", Series: []Series{{Name: "x", Points: []Point{{5, 5}}}}},
			polylines: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteSVG(&buf, tc.plot); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, bad := range []string{"NaN", "Inf"} {
				if strings.Contains(out, bad) {
					t.Errorf("output contains %s", bad)
				}
			}
			dec := xml.NewDecoder(&buf)
			var root string
			polylines, depth := 0, 0
			for {
				tok, err := dec.Token()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("not well-formed XML: %v\n%s", err, out)
				}
				switch el := tok.(type) {
				case xml.StartElement:
					if depth == 0 {
						root = el.Name.Local
						if el.Name.Space != "http://www.w3.org/2000/svg" {
							t.Errorf("root namespace %q", el.Name.Space)
						}
					}
					depth++
					if el.Name.Local == "polyline" {
						polylines++
					}
				case xml.EndElement:
					depth--
				}
			}
			if root != "svg" || depth != 0 {
				t.Errorf("root element %q, final depth %d", root, depth)
			}
			if polylines != tc.polylines {
				t.Errorf("%d polylines, want %d", polylines, tc.polylines)
			}
		})
	}
}
