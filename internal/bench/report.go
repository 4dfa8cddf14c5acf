package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/cost"
)

// progressWriter prints the once-a-second progress line and notes to
// stderr: on a terminal the line rewrites itself with a carriage return,
// elsewhere (a log file, CI) each second is its own line.
type progressWriter struct {
	w        io.Writer
	terminal bool
	mu       struct {
		sync.Mutex
		open bool // a progress line without its newline is on screen
	}
}

func newProgressWriter(w io.Writer) *progressWriter {
	p := &progressWriter{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.terminal = true
		}
	}
	return p
}

func (p *progressWriter) progress(label string, pt TimelinePoint, e2e bool) {
	line := fmt.Sprintf("%-14s %5.0fs %10.0f rec/s %8.2f MB/s  produce p99 %8.2f ms",
		label, pt.T, pt.ProducedPerSec, pt.ProducedMBps, pt.ProduceP99Ms)
	if e2e {
		line += fmt.Sprintf("  e2e p99 %8.2f ms  consumed %10.0f rec/s", pt.E2EP99Ms, pt.ConsumedPerSec)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.terminal {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
		p.mu.open = true
	} else {
		fmt.Fprintln(p.w, line)
	}
}

func (p *progressWriter) endProgress() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.open {
		fmt.Fprintln(p.w)
		p.mu.open = false
	}
}

func (p *progressWriter) note(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.open {
		fmt.Fprintln(p.w)
		p.mu.open = false
	}
	fmt.Fprintf(p.w, "bench: "+format+"\n", args...)
}

func writeJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func writeText(w io.Writer, r *Report) error {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "strand bench: %s", o.Target)
	if o.Target == "embedded" {
		fmt.Fprintf(&b, " (objstore-latency %s, flush-interval %s, flush-bytes %d, objstore-hedge-percentile %g, objstore-hedge-max-ratio %g, max-puts-per-sec %g)",
			o.ObjStoreLatency, o.FlushInterval, o.FlushBytes, o.HedgePercentile, o.HedgeMaxRatio, o.MaxPutsPerSec)
		if o.ExpressZones > 0 {
			fmt.Fprintf(&b, " (express-zones %d)", o.ExpressZones)
		}
	}
	rate := "unlimited"
	if o.Rate > 0 {
		rate = fmt.Sprintf("%.0f rec/s", o.Rate)
	}
	if r.Nexmark != nil {
		b.WriteString("\n")
	} else {
		fmt.Fprintf(&b, "\n  %d producers, %d consumers, topic %s with %d partitions, %d B records, acks=%s, compression %s, linger %s, rate %s, %s after %s warm-up\n",
			o.Producers, o.Consumers, o.Topic, o.Partitions, o.RecordSize, o.Acks, o.Compression, o.Linger, rate, o.Duration, o.Warmup)
	}
	fmt.Fprintf(&b, "  %d CPUs; load average %s at start, %s at end\n", r.CPUs, fmtLoad(r.LoadStart), fmtLoad(r.LoadEnd))
	switch {
	case r.Nexmark != nil:
		writeNexmark(&b, r.Nexmark)
	case r.ColdRead != nil:
		writeColdRead(&b, r.ColdRead, o.ObjStoreLatency)
	default:
		writePhase(&b, r.Strand, "")
	}
	if r.Kfake != nil {
		writePhase(&b, r.Kfake, o.KfakeMode)
		q := r.Ratios
		fmt.Fprintf(&b, "\nstrand / kfake: throughput %.2fx, produce p50 %.2fx p99 %.2fx", q.Throughput, q.ProduceP50, q.ProduceP99)
		if q.E2EP99 != 0 {
			fmt.Fprintf(&b, ", end-to-end p50 %.2fx p99 %.2fx", q.E2EP50, q.E2EP99)
		}
		if q.CPUPerGB != 0 {
			fmt.Fprintf(&b, ", server CPU per GB moved %.2fx", q.CPUPerGB)
		}
		b.WriteString("\n")
	}
	writeStress(&b, r)
	writeStorage(&b, r.Storage)
	if c := r.Cost; c != nil {
		fmt.Fprintf(&b, "\ncost per GB ingested at %s prices: fan-out %g, %g days kept, %d zones\n",
			c.Region, c.Workload.FanOut, c.Workload.RetentionDays, c.Workload.Zones)
		for _, rep := range []cost.Report{c.Strand, c.Kafka, c.KafkaFollowerFetching} {
			b.WriteString(rep.Format())
		}
	}
	if d := r.Disk; d != nil {
		fmt.Fprintf(&b, "\ndisk: fsync'd sequential writes %.1f MB/s (%d MiB in %d KiB chunks, %.0f fsyncs/s, mean fsync %.2f ms); strand ingest is %.1f%% of it\n",
			d.BytesPerSec/1e6, d.Bytes>>20, d.ChunkBytes>>10, d.FsyncsPerSec, d.MeanFsyncMs, d.IngestPercent)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func fmtLoad(l []float64) string {
	if len(l) != 3 {
		return "unknown"
	}
	return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2])
}

func writePhase(b *strings.Builder, p *PhaseResult, mode string) {
	fmt.Fprintf(b, "\n%s", p.Target)
	if mode != "" {
		fmt.Fprintf(b, " (%s)", mode)
	}
	fmt.Fprintf(b, ", %.1f s measured (MB = 10^6 B of record values)\n", p.Seconds)
	fmt.Fprintf(b, "  produced   %10.0f rec/s %9.2f MB/s  (%d records, %d errors)\n",
		p.Produced.RecordsPerSec, p.Produced.MBPerSec, p.Produced.Records, p.Produced.Errors)
	if c := p.Consumed; c != nil {
		fmt.Fprintf(b, "  consumed   %10.0f rec/s %9.2f MB/s  (%d records, %d errors)\n",
			c.RecordsPerSec, c.MBPerSec, c.Records, c.Errors)
	}
	fmt.Fprintf(b, "  latency ms %9s %9s %9s %9s %9s %9s %10s\n", "p50", "p90", "p99", "p99.9", "max", "mean", "count")
	row := func(name string, l Latency) {
		fmt.Fprintf(b, "  %-10s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %10d\n", name, l.P50Ms, l.P90Ms, l.P99Ms, l.P999Ms, l.MaxMs, l.MeanMs, l.Count)
	}
	row("produce", p.ProduceLatency)
	if p.E2ELatency != nil {
		row("end-to-end", *p.E2ELatency)
	}
	if a := p.Agent; a != nil {
		fmt.Fprintf(b, "  objstore   PUT %.1f/s (%.3f per MB produced, %.1f MB/s written)  GET %.1f/s (%.3f per MB consumed, %.1f MB/s read)\n",
			a.PutsPerSec, a.PutsPerMB, a.PutBytes/p.Seconds/1e6, a.GetsPerSec, a.GetsPerMB, a.GetBytes/p.Seconds/1e6)
		if len(a.ExpressPutsPerSec) > 0 {
			zones := slices.Sorted(maps.Keys(a.ExpressPutsPerSec))
			fmt.Fprintf(b, "  express    PUT/s per zone bucket:")
			for _, z := range zones {
				fmt.Fprintf(b, " %s %.1f", z, a.ExpressPutsPerSec[z])
			}
			fmt.Fprintf(b, "; %.0f flushes written to a third zone\n", a.ExpressThirds)
		}
		if a.Hedges > 0 {
			fmt.Fprintf(b, "  hedges     %.0f uploads hedged (%.1f%% of flushes), %.0f won by the hedge\n",
				a.Hedges, 100*a.Hedges/max(a.Flushes, 1), a.HedgesWon)
		}
		fmt.Fprintf(b, "  log        %.1f appends/s, %.1f flushes/s, %.2f appends per flush, mean flush %.1f KB, %.1f produce requests/s\n",
			a.LogAppendsPerSec, a.FlushesPerSec, a.LogAppendsPerFlush, a.MeanFlushBytes/1e3, a.ProduceRequests/p.Seconds)
		fmt.Fprintf(b, "  cpu        %.2f cores; RSS %.0f MB (max %.0f MB) [%s]\n",
			a.CPUCores, a.RSSBytes/1e6, a.RSSMaxBytes/1e6, a.CPUScope)
	} else if p.Target == "strand" {
		b.WriteString("  (no agent metrics: give --http to read /metrics)\n")
	}
	if p.CPUSecondsPerGB > 0 {
		fmt.Fprintf(b, "  server cpu %.2f CPU-s per GB moved (produced plus consumed; %.1f CPU-s over the window, from %s)\n",
			p.CPUSecondsPerGB, p.ServerCPUSeconds, p.ServerCPUFrom)
	}
	if p.FirstError != "" {
		fmt.Fprintf(b, "  first error: %s\n", p.FirstError)
	}
}

// writePlot draws produce and end-to-end p50/p99 per second for every
// phase, the comparison's dashed.
func writePlot(path string, r *Report) error {
	plot := Plot{
		Title:  fmt.Sprintf("strand bench: latency per second (%s, %d producers, %d B records)", r.Options.Target, r.Options.Producers, r.Options.RecordSize),
		XLabel: "seconds since start (dotted: end of warm-up)",
		YLabel: "latency, ms (log scale)",
		LogY:   true,
	}
	if w, err := parseDurationSeconds(r.Options.Warmup); err == nil && w > 0 {
		plot.MarkX = []float64{w}
	}
	for _, p := range []*PhaseResult{r.Strand, r.Kfake} {
		if p == nil {
			continue
		}
		dashed := p != r.Strand
		var pp50, pp99, ep50, ep99 []Point
		for _, t := range p.Timeline {
			if t.ProduceLatCount > 0 {
				pp50 = append(pp50, Point{t.T, t.ProduceP50Ms})
				pp99 = append(pp99, Point{t.T, t.ProduceP99Ms})
			}
			if t.E2ELatCount > 0 {
				ep50 = append(ep50, Point{t.T, t.E2EP50Ms})
				ep99 = append(ep99, Point{t.T, t.E2EP99Ms})
			}
		}
		// One color per measure, so a target's line and its comparison's
		// differ only by the dash.
		plot.Series = append(plot.Series,
			Series{Name: p.Target + " produce p50", Points: pp50, Dashed: dashed, Color: svgColors[0]},
			Series{Name: p.Target + " produce p99", Points: pp99, Dashed: dashed, Color: svgColors[1]})
		if len(ep50) > 0 {
			plot.Series = append(plot.Series,
				Series{Name: p.Target + " e2e p50", Points: ep50, Dashed: dashed, Color: svgColors[2]},
				Series{Name: p.Target + " e2e p99", Points: ep99, Dashed: dashed, Color: svgColors[3]})
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteSVG(f, plot); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func parseDurationSeconds(s string) (float64, error) {
	d, err := time.ParseDuration(s)
	return d.Seconds(), err
}
