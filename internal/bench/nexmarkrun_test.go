package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/bench/nexmark"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

func TestMain(m *testing.M) {
	RunServerCommandIfChild() // the bench's child servers re-execute this binary
	os.Exit(pgtest.Run(m))
}

// TestNexmarkEmbedded runs --nexmark briefly against an embedded agent
// and checks, before the agent stops, that the q0 view holds every bid
// produced (count against the producer's acknowledged records), and that
// q4's rows are PostgreSQL's for the same events read back from the
// topics; and that the report has its throughput and freshness lines.
func TestNexmarkEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an agent and runs for seconds")
	}
	pgURL := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	checked := false
	o := Options{
		Embedded: true, Nexmark: true, NexmarkQueries: "q0,q2,q4,q6",
		Rate: 300, Duration: 3 * time.Second, DataDir: t.TempDir(), NexmarkReplay: true,
	}
	o.afterNexmark = func(ctx context.Context, sqlAddr string, brokers []string, r *NexmarkResult) error {
		checked = true
		if r.DrainSeconds < 0 {
			return fmt.Errorf("views did not consume every event: %+v", r.Views)
		}
		conn, err := pgx.Connect(ctx, sqlURL(sqlAddr))
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		// The drain saw the offsets; the count is of the committed rows.
		var n int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM nexmark_q0").Scan(&n); err != nil {
			return err
		}
		if n != r.Produced["bid"] || n == 0 {
			return fmt.Errorf("nexmark_q0 has %d rows, %d bids were produced", n, r.Produced["bid"])
		}
		got, err := q4Rows(ctx, conn, "SELECT category, avg_final::float8 FROM nexmark_q4")
		if err != nil {
			return err
		}
		want, err := q4Oracle(ctx, pgURL, brokers)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) || len(want) == 0 {
			return fmt.Errorf("nexmark_q4:\n%s\nPostgreSQL:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// A point lookup on a view's key (auction, the first column
		// of q2's whole-row key) answers what the WHERE over a full
		// scan does (auction + 0 is no column, so it scans).
		for _, auction := range []int64{1107, 1230, 1000, 123 * (markerAuctionBase + 1)} {
			var byKey, byScan int64
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM nexmark_q2 WHERE auction = $1", auction).Scan(&byKey); err != nil {
				return err
			}
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM nexmark_q2 WHERE auction + 0 = $1", auction).Scan(&byScan); err != nil {
				return err
			}
			if byKey != byScan {
				return fmt.Errorf("nexmark_q2 auction %d: %d rows by key, %d by a scan", auction, byKey, byScan)
			}
		}
		return nil
	}
	var out, errOut bytes.Buffer
	rep, err := Run(ctx, o, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if !checked {
		t.Fatal("the views were not checked")
	}
	r := rep.Nexmark
	for _, v := range r.Views {
		switch {
		case v.Refused != "":
			t.Errorf("%s refused: %s", v.Query, v.Refused)
		case v.Consumed != float64(v.Expected) || v.EventsPerSec <= 0:
			t.Errorf("%s consumed %v of %d, %v events/s", v.Query, v.Consumed, v.Expected, v.EventsPerSec)
		}
	}
	// The replays run after afterNexmark, over the same topics: each
	// consumed what its load view did.
	var replayed []string
	for _, p := range r.Replay {
		replayed = append(replayed, p.Query)
		for _, v := range r.Views {
			if v.Query == p.Query && (p.Error != "" || p.Events != float64(v.Expected) || p.EventsPerCore <= 0) {
				t.Errorf("replay %s: %+v, want %d events", p.Query, p, v.Expected)
			}
		}
	}
	if !slices.Equal(replayed, []string{"q0", "q2", "q4", "q6"}) {
		t.Errorf("replayed %v, want q0, q2, q4, q6", replayed)
	}
	if r.LookupErr != "" || r.LookupSamples == 0 || r.IdleLookupSamples != idleLookups || r.IdleLookupP99Ms < r.IdleLookupP50Ms || r.IdleLookupP50Ms <= 0 {
		t.Errorf("point lookups: error %q, %d during the load, %d after, p50 %v ms, p99 %v ms", r.LookupErr, r.LookupSamples, r.IdleLookupSamples, r.IdleLookupP50Ms, r.IdleLookupP99Ms)
	}
	if r.FreshnessSamples == 0 || r.FreshnessP99Ms < r.FreshnessP50Ms || r.FreshnessP50Ms <= 0 {
		t.Errorf("freshness: %d samples, p50 %v ms, p99 %v ms", r.FreshnessSamples, r.FreshnessP50Ms, r.FreshnessP99Ms)
	}
	text := out.String()
	for _, want := range []string{"freshness (marker bid produced -> visible in SELECT on nexmark_q2): p50 ", "nexmark_q4", "nexmark_q6",
		"point lookup (SELECT * FROM nexmark_q2 WHERE auction = $1, during the load): p50 ", "point lookup after the load"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	t.Logf("\n%s", text)
}

func q4Rows(ctx context.Context, conn *pgx.Conn, query string) ([]string, error) {
	rows, err := conn.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		var cat int64
		var avg float64
		if err := rows.Scan(&cat, &avg); err != nil {
			return nil, err
		}
		// Twelve significant digits: the engines may sum in another
		// order, PostgreSQL's numeric avg is exact.
		out = append(out, fmt.Sprintf("%d %.12g", cat, avg))
	}
	slices.Sort(out)
	return out, rows.Err()
}

// q4Oracle reads the auction and bid topics back and runs q4 in
// PostgreSQL over them.
func q4Oracle(ctx context.Context, pgURL string, brokers []string) ([]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("auction", "bid"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "auction", "bid")
	if err != nil {
		return nil, err
	}
	var want int64
	ends.Each(func(l kadm.ListedOffset) { want += l.Offset })
	var auctions, bids [][]any
	for got := int64(0); got < want; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return nil, err
		}
		for _, r := range fs.Records() {
			got++
			if r.Topic == "auction" {
				var a nexmark.Auction
				if err := json.Unmarshal(r.Value, &a); err != nil {
					return nil, err
				}
				auctions = append(auctions, []any{a.ID, a.DateTime.Time, a.Expires.Time, a.Category})
			} else {
				var b nexmark.Bid
				if err := json.Unmarshal(r.Value, &b); err != nil {
					return nil, err
				}
				bids = append(bids, []any{b.Auction, b.Price, b.DateTime.Time})
			}
		}
	}
	pg, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return nil, err
	}
	defer pg.Close(context.Background())
	// Temporary tables come first in the search path, so q4's names
	// resolve to them and nothing outlives the connection.
	for _, ddl := range []string{
		"CREATE TEMP TABLE auction (id int8, date_time timestamp, expires timestamp, category int8)",
		"CREATE TEMP TABLE bid (auction int8, price int8, date_time timestamp)",
	} {
		if _, err := pg.Exec(ctx, ddl); err != nil {
			return nil, err
		}
	}
	if _, err := pg.CopyFrom(ctx, pgx.Identifier{"auction"}, []string{"id", "date_time", "expires", "category"}, pgx.CopyFromRows(auctions)); err != nil {
		return nil, err
	}
	if _, err := pg.CopyFrom(ctx, pgx.Identifier{"bid"}, []string{"auction", "price", "date_time"}, pgx.CopyFromRows(bids)); err != nil {
		return nil, err
	}
	q, err := nexmark.LoadQuery("q4")
	if err != nil {
		return nil, err
	}
	return q4Rows(ctx, pg, "SELECT category, avg_final::float8 FROM ("+q.SQL+") q4")
}

func TestNexmarkConfigProportions(t *testing.T) {
	for _, tc := range []struct {
		in      string
		p, a, b int
		bad     bool
	}{
		{in: ""},
		{in: "10,30,10", p: 10, a: 30, b: 10},
		{in: " 1, 3 ,46 ", p: 1, a: 3, b: 46},
		{in: "1,3", bad: true},
		{in: "0,3,46", bad: true},
		{in: "1,x,46", bad: true},
		{in: "1,3,1001", bad: true},
	} {
		cfg, err := nexmarkConfig(tc.in)
		if (err != nil) != tc.bad {
			t.Fatalf("%q: err %v, want error %v", tc.in, err, tc.bad)
		}
		if tc.bad {
			if !errors.Is(err, ErrUsage) {
				t.Fatalf("%q: %v is not a usage error", tc.in, err)
			}
			continue
		}
		if cfg.PersonProportion != tc.p || cfg.AuctionProportion != tc.a || cfg.BidProportion != tc.b {
			t.Fatalf("%q: proportions %d,%d,%d", tc.in, cfg.PersonProportion, cfg.AuctionProportion, cfg.BidProportion)
		}
	}
}
