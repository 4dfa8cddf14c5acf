package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/express"
	"github.com/strandkafka/strand/internal/objstore/objurl"
)

// DefaultExpressPutsPerSec is --max-puts-per-sec's default with the
// low-latency tier: the budget is each zone bucket's there, and 20 PUTs
// a second per bucket is the goal of issue 34 (about 30 flushes a
// second over three zones).
const DefaultExpressPutsPerSec = 20.0

// expressZone is one zone of --objstore-express.
type expressZone struct {
	name, url string
}

// expressZones parses --objstore-express: "name=URL,name=URL[,name=URL]".
func (c *Config) expressZones() ([]expressZone, error) {
	if c.ObjStoreExpress == "" {
		return nil, nil
	}
	var zs []expressZone
	for _, part := range strings.Split(c.ObjStoreExpress, ",") {
		name, u, ok := strings.Cut(part, "=")
		if !ok || name == "" || u == "" {
			return nil, fmt.Errorf("objstore-express %q: want name=URL,name=URL[,name=URL]", RedactURL(c.ObjStoreExpress))
		}
		if _, err := objurl.Parse(u); err != nil {
			return nil, fmt.Errorf("objstore-express zone %s: %w", name, err)
		}
		for _, z := range zs {
			if z.name == name {
				return nil, fmt.Errorf("objstore-express: zone %s named twice", name)
			}
		}
		zs = append(zs, expressZone{name: name, url: u})
	}
	if len(zs) < 2 || len(zs) > express.MaxZones {
		return nil, fmt.Errorf("objstore-express: %d zones; two or three are needed", len(zs))
	}
	return zs, nil
}

// validateExpress checks the tier's flags.
func (c *Config) validateExpress() error {
	zs, err := c.expressZones()
	if err != nil || zs == nil {
		if err == nil && c.ObjStoreExpressZone != "" {
			err = errors.New("objstore-express-zone needs --objstore-express")
		}
		return err
	}
	if c.ObjStoreExpressZone != "" && c.expressLocal(zs) < 0 {
		return fmt.Errorf("objstore-express-zone %s is none of --objstore-express's zones", c.ObjStoreExpressZone)
	}
	if !c.Compaction {
		// Only compaction moves a flush out of the zones: without it
		// the tier would hold every byte at several times the
		// regional price, for ever.
		return errors.New("objstore-express needs --compaction-enable")
	}
	return nil
}

func (c *Config) expressLocal(zs []expressZone) int {
	for i, z := range zs {
		if z.name == c.ObjStoreExpressZone {
			return i
		}
	}
	return -1
}

// openExpress puts the low-latency tier in front of main, the regional
// store, when --objstore-express names zones. Each zone's store gets the
// latency profile (its own seed) and the timing metrics main has.
func (a *Agent) openExpress(ctx context.Context, main objstore.Store, profile *objstore.LatencyProfile) (objstore.Store, error) {
	zs, err := a.cfg.expressZones()
	if err != nil || zs == nil {
		return main, err
	}
	zones := make([]express.Zone, len(zs))
	for i, z := range zs {
		s, err := objurl.Open(ctx, z.url)
		if err != nil {
			return nil, fmt.Errorf("objstore-express zone %s: %w", z.name, err)
		}
		if profile != nil {
			// Fixed seeds, one per zone: the zones' delays are
			// independent, and two runs see the same ones.
			dist, err := objstore.NewLatency(*profile, uint64(2+i))
			if err != nil {
				return nil, err
			}
			s = objstore.WithLatency(s, dist)
		}
		zones[i] = express.Zone{Name: z.name, Store: objstore.WithTiming(s, a.metrics.objstoreDone)}
	}
	x, err := express.New(express.Config{Main: main, Zones: zones, Local: a.cfg.expressLocal(zs)})
	if err != nil {
		return nil, err
	}
	a.express = x
	a.metrics.reg.MustRegister(newExpressCollector(x, zs))
	return x, nil
}

// expressCollector exports the tier's write counts.
type expressCollector struct {
	x        *express.Store
	names    []string
	puts     *prometheus.Desc
	putBytes *prometheus.Desc
	thirds   *prometheus.Desc
}

func newExpressCollector(x *express.Store, zs []expressZone) *expressCollector {
	c := &expressCollector{x: x,
		puts: prometheus.NewDesc("strand_express_puts_total",
			"Data object writes acknowledged by each zone bucket of the low-latency tier (--objstore-express).", []string{"zone"}, nil),
		putBytes: prometheus.NewDesc("strand_express_put_bytes_total",
			"Bytes of the data object writes strand_express_puts_total counts.", []string{"zone"}, nil),
		thirds: prometheus.NewDesc("strand_express_third_writes_total",
			"Flushes written to a third zone of the low-latency tier because one of their pair was slow or failed.", nil, nil),
	}
	for _, z := range zs {
		c.names = append(c.names, z.name)
	}
	return c
}

func (c *expressCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.puts
	ch <- c.putBytes
	ch <- c.thirds
}

func (c *expressCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.x.Stats()
	for i, n := range st.Puts {
		ch <- prometheus.MustNewConstMetric(c.puts, prometheus.CounterValue, float64(n), c.names[i])
		ch <- prometheus.MustNewConstMetric(c.putBytes, prometheus.CounterValue, float64(st.PutBytes[i]), c.names[i])
	}
	ch <- prometheus.MustNewConstMetric(c.thirds, prometheus.CounterValue, float64(st.Thirds))
}

// expressZones is the number of the tier's zones; 0 when it is off.
func (a *Agent) expressZones() int {
	if a.express == nil {
		return 0
	}
	return a.express.Zones()
}
