package pgsource_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/connect/avroconv"
)

// TestThroughput measures rows/s of the snapshot and of streaming on
// this machine (PostgreSQL, the agent and the task in one process
// tree). Run with STRAND_PGSOURCE_BENCH=<rows>:
//
//	STRAND_PGSOURCE_BENCH=200000 go test ./internal/connect/pgsource -run TestThroughput -v
//
// The snapshot figure is from the task's start until the snapshot is
// committed (slot creation included); the streaming figure is a task
// started behind rows/100 transactions of 100 rows each, until the
// slot confirms the last. STRAND_PGSOURCE_BENCH_AVRO=1 writes keys and
// values with the AvroConverter, against an in-process registry.
func TestThroughput(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("STRAND_PGSOURCE_BENCH"))
	if n <= 0 {
		t.Skip("set STRAND_PGSOURCE_BENCH=<rows> to measure")
	}
	f := newFixture(t, "throughput")
	if os.Getenv("STRAND_PGSOURCE_BENCH_AVRO") == "1" {
		regURL, _ := registry(t)
		for k, v := range map[string]string{"key.converter": avroconv.AvroClass, "value.converter": avroconv.AvroClass,
			"schema.registry.url": regURL, "basic.auth.credentials.source": "USER_INFO", "basic.auth.user.info": "user:pass"} {
			f.config[k] = v
		}
	}
	f.exec(`CREATE TABLE b (id int8 PRIMARY KEY, v int8 NOT NULL, name text, at timestamptz, price numeric(12,2))`,
		fmt.Sprintf(`INSERT INTO b SELECT g, g * 7, 'name ' || g, now(), g / 100.0 FROM generate_series(1, %d) g`, n))
	began := time.Now()
	r := f.start()
	f.sync(r)
	snap := time.Since(began)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	const perTxn = 100
	for i := 0; i < n/perTxn; i++ {
		lo := n + i*perTxn + 1
		f.exec(fmt.Sprintf(`INSERT INTO b SELECT g, g * 7, 'name ' || g, now(), g / 100.0 FROM generate_series(%d, %d) g`, lo, lo+perTxn-1))
	}
	end := f.currentLSN()
	began = time.Now()
	r = f.start()
	defer r.stop()
	f.waitConfirmed(r, end)
	stream := time.Since(began)
	t.Logf("snapshot: %d rows in %v = %.0f rows/s", n, snap.Round(time.Millisecond), float64(n)/snap.Seconds())
	t.Logf("streaming: %d rows in %d transactions in %v = %.0f rows/s", n/perTxn*perTxn, n/perTxn, stream.Round(time.Millisecond),
		float64(n/perTxn*perTxn)/stream.Seconds())
}
