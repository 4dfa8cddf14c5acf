package sqltest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/strandkafka/strand/internal/bench/nexmark"
)

// Nexmark's tables, with RisingWave's column names and PostgreSQL's
// types: what CREATE SOURCE declares over the generator's topics.
var (
	PersonColumns = []Column{
		{"id", "int8"}, {"name", "text"}, {"email_address", "text"}, {"credit_card", "text"},
		{"city", "text"}, {"state", "text"}, {"date_time", "timestamp"}, {"extra", "text"},
	}
	AuctionColumns = []Column{
		{"id", "int8"}, {"item_name", "text"}, {"description", "text"}, {"initial_bid", "int8"},
		{"reserve", "int8"}, {"date_time", "timestamp"}, {"expires", "timestamp"}, {"seller", "int8"},
		{"category", "int8"}, {"extra", "text"},
	}
	BidColumns = []Column{
		{"auction", "int8"}, {"bidder", "int8"}, {"price", "int8"}, {"channel", "text"},
		{"url", "text"}, {"date_time", "timestamp"}, {"extra", "text"},
	}
)

// NexmarkTables are person, auction and bid holding events.
func NexmarkTables(events []nexmark.Event) []Table {
	p := Table{Name: "person", Columns: PersonColumns}
	a := Table{Name: "auction", Columns: AuctionColumns}
	b := Table{Name: "bid", Columns: BidColumns}
	for _, ev := range events {
		switch ev.Kind {
		case nexmark.KindPerson:
			x := ev.Person
			p.Rows = append(p.Rows, []any{x.ID, x.Name, x.EmailAddress, x.CreditCard, x.City, x.State, x.DateTime.Time, x.Extra})
		case nexmark.KindAuction:
			x := ev.Auction
			a.Rows = append(a.Rows, []any{x.ID, x.ItemName, x.Description, x.InitialBid, x.Reserve, x.DateTime.Time, x.Expires.Time, x.Seller, x.Category, x.Extra})
		case nexmark.KindBid:
			x := ev.Bid
			b.Rows = append(b.Rows, []any{x.Auction, x.Bidder, x.Price, x.Channel, x.URL, x.DateTime.Time, x.Extra})
		}
	}
	return []Table{p, a, b}
}

// NexmarkCorpusConfig is the stream the Nexmark corpus is checked over:
// 50 events per second of event time, so 5000 events span 100 s and the
// queries' 10 s windows hold several hundred bids each.
func NexmarkCorpusConfig(seed uint64, events int64) nexmark.Config {
	return nexmark.Config{Seed: seed, MaxEvents: events, FirstEventRate: 50}
}

// GenerateNexmark returns cfg's events.
func GenerateNexmark(cfg nexmark.Config) ([]nexmark.Event, error) {
	g, err := nexmark.NewGenerator(cfg)
	if err != nil {
		return nil, err
	}
	var evs []nexmark.Event
	for {
		ev, ok := g.Next()
		if !ok {
			return evs, nil
		}
		evs = append(evs, ev)
	}
}

// The small tables of the general corpus: a shop's customers, products
// and orders, keyed by id (the first column), with NULLs in nullable
// columns, repeated values to group by, orders naming customers that do
// not exist (outer joins) and customers without orders.
var (
	CustomerColumns = []Column{{"id", "int8"}, {"name", "text"}, {"city", "text"}, {"tier", "int4"}, {"signup", "timestamp"}}
	ProductColumns  = []Column{{"id", "int8"}, {"name", "text"}, {"category", "text"}, {"list_price", "numeric(10,2)"}}
	OrderColumns    = []Column{
		{"id", "int8"}, {"customer_id", "int8"}, {"product_id", "int8"}, {"qty", "int4"},
		{"price", "numeric(10,2)"}, {"discount", "float8"}, {"status", "text"}, {"ts", "timestamp"},
	}
)

// Change is one keyed change to a small table, as an upsert topic
// carries it: Row is the new row (its first value is Key), nil deletes.
type Change struct {
	Table string
	Key   int64
	Row   []any
}

// SmallBaseTime is the first order's time in the small tables.
var SmallBaseTime = time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)

var (
	cities     = []any{"Lyon", "Oslo", "Porto", "Kyoto", nil}
	tiers      = []any{int32(1), int32(2), int32(3), nil}
	categories = []string{"books", "games", "tools", "food"}
	statuses   = []string{"new", "paid", "shipped", "cancelled"}
	firstNames = []string{"Ada", "Bo", "Cy", "Di", "Ed", "Flo"}
)

// SmallChanges is a seeded history of n changes to customers, products
// and orders: inserts first, then a mix in which about a fifth update a
// row (new values, sometimes a new group), a tenth delete one, and some
// re-insert a deleted key. An engine fed these in order must end with
// what SmallTables' final state gives DuckDB.
func SmallChanges(seed uint64, n int) []Change {
	r := rand.New(rand.NewPCG(seed, 0x736d616c6c)) // "small"
	var out []Change
	live := map[string][]int64{}
	dead := map[string][]int64{}
	next := map[string]int64{"customers": 1, "products": 1, "orders": 1}
	newRow := func(table string, id int64) []any {
		switch table {
		case "customers":
			return []any{id, fmt.Sprintf("%s %d", firstNames[r.IntN(len(firstNames))], id), cities[r.IntN(len(cities))],
				tiers[r.IntN(len(tiers))], SmallBaseTime.Add(-time.Duration(r.IntN(1000)) * time.Hour)}
		case "products":
			return []any{id, fmt.Sprintf("product %d", id), categories[r.IntN(len(categories))], cents(100 + r.IntN(9900))}
		}
		// Orders name customers 1-30 (some never created) or none, and
		// products 1-12; times spread over two hours, so 10-minute
		// windows hold a few orders each.
		var customer any = int64(1 + r.IntN(30))
		if r.IntN(12) == 0 {
			customer = nil
		}
		var discount any = float64(r.IntN(30)) / 100
		if r.IntN(5) == 0 {
			discount = nil
		}
		return []any{id, customer, int64(1 + r.IntN(12)), int32(1 + r.IntN(5)), cents(50 + r.IntN(5000)), discount,
			statuses[r.IntN(len(statuses))], SmallBaseTime.Add(time.Duration(r.IntN(7200)) * time.Second)}
	}
	insert := func(table string, id int64) {
		out = append(out, Change{Table: table, Key: id, Row: newRow(table, id)})
		live[table] = append(live[table], id)
	}
	// The seed rows: 25 customers and 12 products; orders come with
	// the history.
	for range 25 {
		insert("customers", next["customers"])
		next["customers"]++
	}
	for range 12 {
		insert("products", next["products"])
		next["products"]++
	}
	for len(out) < n {
		table := []string{"customers", "products", "orders", "orders", "orders", "orders"}[r.IntN(6)]
		ids := live[table]
		switch p := r.IntN(100); {
		case p < 20 && len(ids) > 0: // update
			id := ids[r.IntN(len(ids))]
			out = append(out, Change{Table: table, Key: id, Row: newRow(table, id)})
		case p < 30 && len(ids) > 0: // delete
			i := r.IntN(len(ids))
			id := ids[i]
			live[table] = slices.Delete(ids, i, i+1)
			dead[table] = append(dead[table], id)
			out = append(out, Change{Table: table, Key: id})
		case p < 35 && len(dead[table]) > 0: // re-insert a deleted key
			d := dead[table]
			i := r.IntN(len(d))
			id := d[i]
			dead[table] = slices.Delete(d, i, i+1)
			insert(table, id)
		default:
			if table != "orders" && r.IntN(4) > 0 {
				table = "orders" // keep the dimension tables small
			}
			insert(table, next[table])
			next[table]++
		}
	}
	return out[:n]
}

func cents(c int) pgtype.Numeric {
	var n pgtype.Numeric
	if err := n.Scan(fmt.Sprintf("%d.%02d", c/100, c%100)); err != nil {
		panic(err)
	}
	return n
}

// SmallTables is the final state of changes: customers, products and
// orders, each row the last written for its key, deleted keys absent,
// rows in key order.
func SmallTables(changes []Change) []Table {
	state := map[string]map[int64][]any{"customers": {}, "products": {}, "orders": {}}
	for _, c := range changes {
		if c.Row == nil {
			delete(state[c.Table], c.Key)
		} else {
			state[c.Table][c.Key] = c.Row
		}
	}
	tables := []Table{
		{Name: "customers", Columns: CustomerColumns},
		{Name: "products", Columns: ProductColumns},
		{Name: "orders", Columns: OrderColumns},
	}
	for i := range tables {
		rows := state[tables[i].Name]
		keys := make([]int64, 0, len(rows))
		for k := range rows {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			tables[i].Rows = append(tables[i].Rows, rows[k])
		}
	}
	return tables
}
