package jdbcsink

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strandkafka/strand/internal/testservers/mariadbtest"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// eoRecords is how many records the exactly-once tests produce.
const eoRecords = 3000

// produceRows produces eoRecords flat rows {"id": i, "v": "..."} in the
// background, spread over the topic's partitions by key, pausing pace
// every 100 records; done closes when all are in.
func produceRows(t *testing.T, p *producer, topic string, pace time.Duration) (done chan struct{}) {
	done = make(chan struct{})
	go func() {
		defer close(done)
		for i := range eoRecords {
			p.send(topic, fmt.Sprint(i), fmt.Sprintf(`{"id": %d, "v": "value %d"}`, i, i))
			if i%100 == 0 {
				time.Sleep(pace) // a stream, not one burst
			}
		}
	}()
	return done
}

// checkOnce reads the table: every id once, none missing. The sink
// writes with insert.mode=insert and no key, so a batch applied twice
// would show as duplicate rows, and a lost one as missing ids.
func checkOnce(t *testing.T, d *db, table string) {
	t.Helper()
	var n, distinct, lo, hi int
	if err := d.sql.QueryRow("SELECT COUNT(*), COUNT(DISTINCT "+d.q("id")+"), MIN("+d.q("id")+"), MAX("+d.q("id")+") FROM "+d.q(table)).
		Scan(&n, &distinct, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if n != eoRecords || distinct != eoRecords || lo != 0 || hi != eoRecords-1 {
		t.Fatalf("%d rows, %d distinct ids from %d to %d; want each of %d ids once", n, distinct, lo, hi, eoRecords)
	}
	var bad int
	if err := d.sql.QueryRow("SELECT COUNT(*) FROM " + d.q(table) + " WHERE " + d.q("v") + " <> CONCAT('value ', " + d.q("id") + ")").Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Fatalf("%d rows with a value not their record's", bad)
	}
}

func eoConfig(d *db, topic string) map[string]string {
	return d.config(topic, "insert.mode", "insert", "primary.key.mode", "none", "auto.create", "true", "batch.size", "50")
}

// TestExactlyOnceRestarts: the task is cancelled at random points (as
// the agent killed, or the task moved, would stop it) and started
// again, over and over, and the target database is killed with -9 and
// restarted once, while records stream in: every record's row is in the
// table once.
func TestExactlyOnceRestarts(t *testing.T) {
	type server interface {
		Kill()
		Restart() error
		Stop()
	}
	open := map[string]func(t *testing.T) (*db, server){
		"postgresql": func(t *testing.T) (*db, server) {
			s, err := pgtest.Start(pgtest.Options{})
			if err != nil {
				testproc.SkipOrFail(t, err)
			}
			return postgresDB(t, s.URL()), s
		},
		"mariadb": func(t *testing.T) (*db, server) {
			s, err := mariadbtest.Start()
			if err != nil {
				testproc.SkipOrFail(t, err)
			}
			return mariaDB(t, s.DSN(), s.URL()), s
		},
	}
	for _, which := range []string{"postgresql", "mariadb"} {
		t.Run(which, func(t *testing.T) {
			d, srv := open[which](t)
			defer srv.Stop()
			rng := testRand(t)
			topic := uniq("eo")
			kafka := cluster(t, 3, topic)
			p := newProducer(t, kafka)
			done := produceRows(t, p, topic, 5*time.Millisecond)
			name := uniq("eo")
			cfg := eoConfig(d, topic)
			crashed := false
			for round := 0; ; round++ {
				r := start(t, name, cfg, kafka, nil)
				time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
				if round == 10 {
					// The target dies mid-stream: the task fails (the
					// runner would start it again after a backoff).
					srv.Kill()
					if err := srv.Restart(); err != nil {
						t.Fatal(err)
					}
					crashed = true
				}
				err := r.stop()
				if err != nil {
					t.Logf("round %d: the task ended with %v", round, err)
				}
				select {
				case <-done:
				default:
					continue
				}
				if crashed && round >= 20 {
					break
				}
			}
			r := start(t, name, cfg, kafka, nil)
			waitCaughtUp(t, d, name, p, r)
			checkOnce(t, d, topic)
		})
	}
}

// TestExactlyOnceTwoTasks: two tasks of one connector run at once (a
// placement move while agents disagree), one of them also stopped and
// started again: no batch is applied twice, as each checks the locked
// offsets before it writes.
func TestExactlyOnceTwoTasks(t *testing.T) {
	targets(t, func(t *testing.T, d *db) {
		topic := uniq("two")
		kafka := cluster(t, 2, topic)
		p := newProducer(t, kafka)
		done := produceRows(t, p, topic, 5*time.Millisecond)
		name := uniq("two")
		cfg := eoConfig(d, topic)
		m := NewMetrics()
		a := start(t, name, cfg, kafka, m)
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				b := start(t, name, cfg, kafka, m)
				select {
				case <-done:
					waitCaughtUp(t, d, name, p, b)
					b.stop()
					return
				case <-time.After(300 * time.Millisecond):
				}
				if err := b.stop(); err != nil {
					t.Errorf("task b: %v", err)
				}
			}
		})
		<-done
		wg.Wait()
		waitCaughtUp(t, d, name, p, a)
		if err := a.stop(); err != nil {
			t.Fatalf("task a: %v", err)
		}
		checkOnce(t, d, topic)
		if f := counterValue(t, m, name); f == 0 {
			t.Errorf("no batch was fenced: the two tasks never competed, so this test proved nothing")
		} else {
			t.Logf("%v batches fenced", f)
		}
	})
}

func counterValue(t *testing.T, m *Metrics, name string) float64 {
	return metricValue(t, m.fenced.WithLabelValues(name))
}

// metricValue reads a counter's or a gauge's value.
func metricValue(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := c.Write(&out); err != nil {
		t.Fatal(err)
	}
	if out.Counter != nil {
		return out.GetCounter().GetValue()
	}
	return out.GetGauge().GetValue()
}
