package nexmark

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Person is a person record: a new user of the auction site.
type Person struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	EmailAddress string `json:"email_address"`
	CreditCard   string `json:"credit_card"`
	City         string `json:"city"`
	State        string `json:"state"`
	DateTime     Time   `json:"date_time"`
	Extra        string `json:"extra"`
}

// Auction is an auction record: an item put up for sale by Seller,
// open from DateTime to Expires.
type Auction struct {
	ID          int64  `json:"id"`
	ItemName    string `json:"item_name"`
	Description string `json:"description"`
	InitialBid  int64  `json:"initial_bid"`
	Reserve     int64  `json:"reserve"`
	DateTime    Time   `json:"date_time"`
	Expires     Time   `json:"expires"`
	Seller      int64  `json:"seller"`
	Category    int64  `json:"category"`
	Extra       string `json:"extra"`
}

// Bid is a bid record: Bidder offers Price for Auction.
type Bid struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	Channel  string `json:"channel"`
	URL      string `json:"url"`
	DateTime Time   `json:"date_time"`
	Extra    string `json:"extra"`
}

// TimeLayout is how a Time is written: PostgreSQL's timestamp text form
// with milliseconds, which a timestamp column parses.
const TimeLayout = "2006-01-02 15:04:05.000"

// Time is an event timestamp, in UTC, written in JSON as TimeLayout.
type Time struct{ time.Time }

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, t.UTC().Format(TimeLayout)), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("nexmark: time: %w", err)
	}
	v, err := time.Parse(TimeLayout, s)
	if err != nil {
		return fmt.Errorf("nexmark: time: %w", err)
	}
	t.Time = v
	return nil
}

// Record is the event's record: its *Person, *Auction or *Bid.
func (e Event) Record() any {
	switch e.Kind {
	case KindPerson:
		return e.Person
	case KindAuction:
		return e.Auction
	default:
		return e.Bid
	}
}

// JSON is the event's record as a JSON object, a topic record's value.
func (e Event) JSON() ([]byte, error) { return json.Marshal(e.Record()) }

// Key is the record's key for a topic: the person's or auction's id, a
// bid's auction, in decimal, so a keyed topic keeps one entity's events
// in one partition.
func (e Event) Key() []byte {
	switch e.Kind {
	case KindPerson:
		return strconv.AppendInt(nil, e.Person.ID, 10)
	case KindAuction:
		return strconv.AppendInt(nil, e.Auction.ID, 10)
	default:
		return strconv.AppendInt(nil, e.Bid.Auction, 10)
	}
}
