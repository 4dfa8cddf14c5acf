// Package nexmark owns Strand's Nexmark workload: a deterministic,
// seeded generator of the benchmark's Person, Auction and Bid events,
// their JSON form for topics, and a pacer that releases them at a set
// rate of events per second on an internal/clock Clock, and the
// benchmark's queries q0-q8 as SQL with the sources' columns
// (queries.go), which `strand bench --nexmark` creates as views.
//
// The generator follows the Nexmark benchmark's reference generator as
// kept in github.com/nexmark/nexmark (nexmark-flink, generator/ and
// generator/model/, GeneratorConfig, NexmarkGenerator, PersonGenerator,
// AuctionGenerator, BidGenerator, PriceGenerator, StringsGenerator; read
// at commit 6b3646c3): the proportions (1 person : 3 auctions : 46 bids
// in every 50 events, fixed by the event number, not drawn), the id
// schemes (ids from 1000, categories 10-14, hot sellers, bidders and
// auctions as the first of each batch of 100, random picks among the
// last 1000 people and 100 auctions plus a lead of 10 not yet created),
// prices (10^(6u) * 100, u uniform), auction lengths (uniform up to twice
// the event time until 100 more auctions exist), strings, the "extra"
// padding to the average record sizes (200, 500, 100 bytes), and event
// time spacing (event n at baseTime + n * 1e6/firstEventRate µs, with the
// reference's optional out-of-order groups).
//
// Where this generator differs, on purpose:
//   - It is seeded: the reference draws from an unseeded SplittableRandom
//     (and builds its channel URLs from a static unseeded one), so its
//     runs differ; here the same Config gives the same events, byte for
//     byte. The draws are Go's PCG, so values are not the reference's.
//   - The reference adds FIRST_PERSON_ID to a bid's bidder twice (bidders
//     start at 2000, past every person of a short run); it is added once
//     here, so bidders are people, as in the benchmark's description.
//   - The base time is fixed (2015-07-15 00:00:00 UTC, the one
//     RisingWave's Nexmark source uses) instead of the wall clock's.
//   - The reusable "extra" string is 64 KiB, not 1 MiB: extras never
//     exceed a few hundred bytes.
//
// Field names are RisingWave's Nexmark tables' (snake_case: email_address,
// credit_card, item_name, initial_bid, date_time), which need no quoting in
// SQL; timestamps are written as PostgreSQL's timestamp text with
// milliseconds ("2015-07-15 00:00:00.000"), UTC.
package nexmark

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// The reference's constants (GeneratorConfig, *Generator).
const (
	firstAuctionID  = 1000
	firstPersonID   = 1000
	firstCategoryID = 10
	numCategories   = 5
	// personIDLead and auctionIDLead let a pick name an id not yet
	// created, so a join sees its other side arrive late.
	personIDLead  = 10
	auctionIDLead = 10
	// hotBatch: hot sellers, bidders and auctions are the first of each
	// batch of this many ids (HOT_*_RATIO in the reference's model
	// classes, all 100).
	hotBatch        = 100
	hotChannelRatio = 2
	numChannels     = 10000
	minStringLength = 3
	// reusableExtraBytes is the pool "extra" strings are cut from.
	reusableExtraBytes = 64 << 10
)

// DefaultBaseTime is the event time of event 0 unless Config says
// otherwise.
var DefaultBaseTime = time.Date(2015, 7, 15, 0, 0, 0, 0, time.UTC)

// Config is what the generator produces. Zero fields take the
// reference's defaults (NexmarkConfiguration), given in brackets.
type Config struct {
	// Seed picks the stream: the same Config gives the same events.
	Seed uint64
	// BaseTime is event 0's time [DefaultBaseTime].
	BaseTime time.Time
	// FirstEventRate is the events per second of event time: event n
	// happens n/FirstEventRate seconds after BaseTime [10000]. It says
	// nothing of how fast events are produced (see Pacer).
	FirstEventRate int
	// MaxEvents ends the stream after this many events; 0 never ends it.
	MaxEvents int64
	// Proportions of people, auctions and bids [1, 3, 46].
	PersonProportion, AuctionProportion, BidProportion int
	// NumActivePeople is how many of the newest people a random pick
	// chooses among [1000]; NumInFlightAuctions the same for auctions
	// [100].
	NumActivePeople, NumInFlightAuctions int
	// Hot*Ratio: a pick is hot (the batch's first id) with probability
	// 1 - 1/ratio [2 for auctions, 4 for sellers and bidders].
	HotAuctionRatio, HotSellersRatio, HotBiddersRatio int
	// Avg*ByteSize are the average record sizes the "extra" field pads
	// to [200, 500, 100].
	AvgPersonByteSize, AvgAuctionByteSize, AvgBidByteSize int
	// OutOfOrderGroupSize > 1 permutes event times within each group of
	// that many consecutive events [1: event time never decreases]. The
	// reference's permutation is n*953 mod size, so a size dividing 952
	// (2, 4, 7, 8, ...) permutes nothing; 10 is a good choice.
	OutOfOrderGroupSize int64
}

func (c Config) withDefaults() Config {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	if c.BaseTime.IsZero() {
		c.BaseTime = DefaultBaseTime
	}
	def(&c.FirstEventRate, 10000)
	def(&c.PersonProportion, 1)
	def(&c.AuctionProportion, 3)
	def(&c.BidProportion, 46)
	def(&c.NumActivePeople, 1000)
	def(&c.NumInFlightAuctions, 100)
	def(&c.HotAuctionRatio, 2)
	def(&c.HotSellersRatio, 4)
	def(&c.HotBiddersRatio, 4)
	def(&c.AvgPersonByteSize, 200)
	def(&c.AvgAuctionByteSize, 500)
	def(&c.AvgBidByteSize, 100)
	if c.OutOfOrderGroupSize == 0 {
		c.OutOfOrderGroupSize = 1
	}
	return c
}

// Validate reports a Config the generator cannot follow.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{
		{"FirstEventRate", c.FirstEventRate}, {"PersonProportion", c.PersonProportion},
		{"AuctionProportion", c.AuctionProportion}, {"BidProportion", c.BidProportion},
		{"NumActivePeople", c.NumActivePeople}, {"NumInFlightAuctions", c.NumInFlightAuctions},
		{"HotAuctionRatio", c.HotAuctionRatio}, {"HotSellersRatio", c.HotSellersRatio},
		{"HotBiddersRatio", c.HotBiddersRatio}, {"AvgPersonByteSize", c.AvgPersonByteSize},
		{"AvgAuctionByteSize", c.AvgAuctionByteSize}, {"AvgBidByteSize", c.AvgBidByteSize},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("nexmark: %s %d is negative", f.name, f.v))
		}
	}
	if c.MaxEvents < 0 {
		errs = append(errs, fmt.Errorf("nexmark: MaxEvents %d is negative", c.MaxEvents))
	}
	if c.OutOfOrderGroupSize < 0 {
		errs = append(errs, fmt.Errorf("nexmark: OutOfOrderGroupSize %d is negative", c.OutOfOrderGroupSize))
	}
	return errors.Join(errs...)
}

// Kind is which of the three tables an event belongs to.
type Kind uint8

const (
	KindPerson Kind = iota
	KindAuction
	KindBid
)

// Table is the kind's table (and topic) name: person, auction, bid.
func (k Kind) Table() string {
	switch k {
	case KindPerson:
		return "person"
	case KindAuction:
		return "auction"
	case KindBid:
		return "bid"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Event is one generated event: exactly one of Person, Auction and Bid
// is set, as Kind says.
type Event struct {
	Kind    Kind
	Person  *Person
	Auction *Auction
	Bid     *Bid
	// Number is the event's position in the stream, from 0.
	Number int64
	// Time is the event's time (its record's date_time); Watermark is
	// at or below the time of this and every later event.
	Time, Watermark time.Time
}

// Generator produces a Config's events in order. It is not safe for
// concurrent use; run one per producer (with its own Seed) to go wider.
type Generator struct {
	cfg   Config
	rng   *rand.Rand
	total int64 // events in one proportion cycle (50)
	// delayUs is the event time between consecutive events.
	delayUs float64
	count   int64
	extra   string
	hotURLs [4]string
	// channelURLs is the reference's cache of channel URLs: built once
	// per generator from its seed.
	channelURLs [numChannels]string
}

var hotChannels = [4]string{"Google", "Facebook", "Baidu", "Apple"}

var (
	usStates   = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
)

// NewGenerator returns a generator at event 0 of cfg's stream.
func NewGenerator(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	g := &Generator{
		cfg:     cfg,
		total:   int64(cfg.PersonProportion + cfg.AuctionProportion + cfg.BidProportion),
		delayUs: 1e6 / float64(cfg.FirstEventRate),
	}
	// The pools come from their own stream so that growing one does not
	// shift every event's draws.
	setup := rand.New(rand.NewPCG(cfg.Seed, 0x6e65786d61726b)) // "nexmark"
	g.extra = exactString(setup, reusableExtraBytes)
	for i := range g.hotURLs {
		g.hotURLs[i] = baseURL(setup)
	}
	for i := range g.channelURLs {
		u := baseURL(setup)
		if setup.IntN(10) > 0 {
			// Java's Math.abs(Integer.reverse(i)).
			u += fmt.Sprintf("&channel_id=%d", abs32(int32(reverse32(uint32(i)))))
		}
		g.channelURLs[i] = u
	}
	g.rng = rand.New(rand.NewPCG(cfg.Seed, 0x6576656e7473)) // "events"
	return g, nil
}

func reverse32(x uint32) uint32 {
	var r uint32
	for range 32 {
		r = r<<1 | x&1
		x >>= 1
	}
	return r
}

func abs32(x int32) int64 {
	if x < 0 {
		return -int64(x)
	}
	return int64(x)
}

// Config is the generator's configuration, defaults filled in.
func (g *Generator) Config() Config { return g.cfg }

// Count is how many events the generator has produced.
func (g *Generator) Count() int64 { return g.count }

// Next returns the next event, or false once MaxEvents have been made.
func (g *Generator) Next() (Event, bool) {
	if g.cfg.MaxEvents > 0 && g.count >= g.cfg.MaxEvents {
		return Event{}, false
	}
	n := g.count
	adjusted := g.adjustedNumber(n)
	ts := g.timeFor(adjusted)
	ev := Event{
		Number:    n,
		Time:      time.UnixMilli(ts).UTC(),
		Watermark: time.UnixMilli(g.timeFor(n / g.cfg.OutOfOrderGroupSize * g.cfg.OutOfOrderGroupSize)).UTC(),
	}
	// The event id picks the kind; it is the adjusted number, as in the
	// reference, so kinds move with their times inside a group.
	id := adjusted
	switch rem := id % g.total; {
	case rem < int64(g.cfg.PersonProportion):
		ev.Kind, ev.Person = KindPerson, g.person(id, ts)
	case rem < int64(g.cfg.PersonProportion+g.cfg.AuctionProportion):
		ev.Kind, ev.Auction = KindAuction, g.auction(n, id, ts)
	default:
		ev.Kind, ev.Bid = KindBid, g.bid(id, ts)
	}
	g.count++
	return ev, true
}

// adjustedNumber is the reference's nextAdjustedEventNumber: within each
// group of OutOfOrderGroupSize events, a fixed permutation.
func (g *Generator) adjustedNumber(n int64) int64 {
	k := g.cfg.OutOfOrderGroupSize
	return n/k*k + (n*953)%k
}

// timeFor is event n's time in Unix milliseconds (timestampForEvent).
func (g *Generator) timeFor(n int64) int64 {
	return g.cfg.BaseTime.UnixMilli() + int64(float64(n)*g.delayUs)/1000
}

func (g *Generator) lastBase0PersonID(id int64) int64 {
	epoch, offset := id/g.total, id%g.total
	if offset >= int64(g.cfg.PersonProportion) {
		offset = int64(g.cfg.PersonProportion) - 1
	}
	return epoch*int64(g.cfg.PersonProportion) + offset
}

func (g *Generator) lastBase0AuctionID(id int64) int64 {
	epoch, offset := id/g.total, id%g.total
	p, a := int64(g.cfg.PersonProportion), int64(g.cfg.AuctionProportion)
	switch {
	case offset < p:
		epoch--
		offset = a - 1
	case offset >= p+a:
		offset = a - 1
	default:
		offset -= p
	}
	return epoch*a + offset
}

func (g *Generator) nextBase0PersonID(id int64) int64 {
	numPeople := g.lastBase0PersonID(id) + 1
	active := min(numPeople, int64(g.cfg.NumActivePeople))
	return numPeople - active + g.rng.Int64N(active+personIDLead)
}

func (g *Generator) nextBase0AuctionID(id int64) int64 {
	last := g.lastBase0AuctionID(id)
	lo := max(last-int64(g.cfg.NumInFlightAuctions), 0)
	return lo + g.rng.Int64N(last-lo+1+auctionIDLead)
}

// price is PriceGenerator.nextPrice: log-uniform from 100 to 10^8.
func (g *Generator) price() int64 {
	return int64(math.Round(math.Pow(10, g.rng.Float64()*6) * 100))
}

func (g *Generator) person(id, ts int64) *Person {
	p := &Person{
		ID:   g.lastBase0PersonID(id) + firstPersonID,
		Name: firstNames[g.rng.IntN(len(firstNames))] + " " + lastNames[g.rng.IntN(len(lastNames))],
	}
	p.EmailAddress = randString(g.rng, 7, ' ') + "@" + randString(g.rng, 5, ' ') + ".com"
	p.CreditCard = fmt.Sprintf("%04d %04d %04d %04d", g.rng.IntN(10000), g.rng.IntN(10000), g.rng.IntN(10000), g.rng.IntN(10000))
	p.City = usCities[g.rng.IntN(len(usCities))]
	p.State = usStates[g.rng.IntN(len(usStates))]
	p.DateTime = Time{time.UnixMilli(ts).UTC()}
	size := 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State)
	p.Extra = g.nextExtra(size, g.cfg.AvgPersonByteSize)
	return p
}

func (g *Generator) auction(count, id, ts int64) *Auction {
	a := &Auction{ID: g.lastBase0AuctionID(id) + firstAuctionID}
	if g.rng.IntN(g.cfg.HotSellersRatio) > 0 {
		a.Seller = g.lastBase0PersonID(id) / hotBatch * hotBatch
	} else {
		a.Seller = g.nextBase0PersonID(id)
	}
	a.Seller += firstPersonID
	a.Category = firstCategoryID + int64(g.rng.IntN(numCategories))
	a.InitialBid = g.price()
	a.DateTime = Time{time.UnixMilli(ts).UTC()}
	a.Expires = Time{time.UnixMilli(ts + g.auctionLengthMs(count, ts)).UTC()}
	a.ItemName = randString(g.rng, 20, ' ')
	a.Description = randString(g.rng, 100, ' ')
	a.Reserve = a.InitialBid + g.price()
	size := 8 + len(a.ItemName) + len(a.Description) + 8 + 8 + 8 + 8 + 8
	a.Extra = g.nextExtra(size, g.cfg.AvgAuctionByteSize)
	return a
}

// auctionLengthMs is nextAuctionLengthMs: uniform in [1, 2*horizon],
// horizon being the event time until NumInFlightAuctions more auctions
// have been created.
func (g *Generator) auctionLengthMs(count, ts int64) int64 {
	current := g.adjustedNumber(count)
	ahead := int64(g.cfg.NumInFlightAuctions) * g.total / int64(g.cfg.AuctionProportion)
	horizon := g.timeFor(current+ahead) - ts
	return 1 + g.rng.Int64N(max(horizon*2, 1))
}

func (g *Generator) bid(id, ts int64) *Bid {
	b := &Bid{}
	if g.rng.IntN(g.cfg.HotAuctionRatio) > 0 {
		b.Auction = g.lastBase0AuctionID(id) / hotBatch * hotBatch
	} else {
		b.Auction = g.nextBase0AuctionID(id)
	}
	b.Auction += firstAuctionID
	if g.rng.IntN(g.cfg.HotBiddersRatio) > 0 {
		// The batch's second person, so hot bidders are not hot sellers.
		b.Bidder = g.lastBase0PersonID(id)/hotBatch*hotBatch + 1
	} else {
		b.Bidder = g.nextBase0PersonID(id)
	}
	b.Bidder += firstPersonID
	b.Price = g.price()
	if g.rng.IntN(hotChannelRatio) > 0 {
		i := g.rng.IntN(len(hotChannels))
		b.Channel, b.URL = hotChannels[i], g.hotURLs[i]
	} else {
		i := g.rng.IntN(numChannels)
		b.Channel, b.URL = fmt.Sprintf("channel-%d", i), g.channelURLs[i]
	}
	b.DateTime = Time{time.UnixMilli(ts).UTC()}
	b.Extra = g.nextExtra(8+8+8+8, g.cfg.AvgBidByteSize)
	return b
}

// nextExtra is StringsGenerator.nextExtra: a string making the record's
// size average desired, within ±20%.
func (g *Generator) nextExtra(current, desired int) string {
	if current > desired {
		return ""
	}
	desired -= current
	delta := int(math.Round(float64(desired) * 0.2))
	size := desired - delta
	if delta > 0 {
		size += g.rng.IntN(2 * delta)
	}
	off := g.rng.IntN(len(g.extra) - size)
	return g.extra[off : off+size]
}

// randString is StringsGenerator.nextString: 3 to maxLength-1 letters,
// each a special character with probability 1/13, trimmed of spaces.
func randString(r *rand.Rand, maxLength int, special byte) string {
	n := minStringLength + r.IntN(maxLength-minStringLength)
	var sb strings.Builder
	sb.Grow(n)
	for range n {
		if r.IntN(13) == 0 {
			sb.WriteByte(special)
		} else {
			sb.WriteByte(byte('a' + r.IntN(26)))
		}
	}
	return strings.TrimSpace(sb.String())
}

func exactString(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return string(b)
}

func baseURL(r *rand.Rand) string {
	return "https://www.nexmark.com/" + randString(r, 5, '_') + "/" + randString(r, 5, '_') + "/" +
		randString(r, 5, '_') + "/item.htm?query=1"
}
