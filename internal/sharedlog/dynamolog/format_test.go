package dynamolog

import (
	"bytes"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/strandkafka/strand/internal/sharedlog/slotlog"
)

// TestSlotItem round-trips slots through items, the form DynamoDB also
// returns for the occupant of a taken slot (ReturnValuesOnConditionCheckFailure),
// and checks that damaged items are refused.
func TestSlotItem(t *testing.T) {
	tok := slotlog.NewToken()
	for _, s := range []slotlog.Slot{
		{Pos: 0, Kind: slotlog.KindEntry, Token: tok, Data: []byte{}},
		{Pos: 42, Kind: slotlog.KindEntry, Token: tok, Data: []byte("entry")},
		{Pos: 1<<64 - 1, Kind: slotlog.KindSeal, Token: tok},
	} {
		item, err := encodeSlot("log:x", s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeSlot(item, true)
		if err != nil || got.Pos != s.Pos || got.Kind != s.Kind || got.Token != s.Token || !bytes.Equal(got.Data, s.Data) {
			t.Fatalf("decodeSlot(encodeSlot(%+v)) = (%+v, %v)", s, got, err)
		}
	}
	damage := []struct {
		name string
		fn   func(map[string]types.AttributeValue)
	}{
		{"checksum", func(m map[string]types.AttributeValue) {
			m[attrData] = &types.AttributeValueMemberB{Value: []byte("entrx")}
		}},
		{"no token", func(m map[string]types.AttributeValue) { delete(m, attrToken) }},
		{"short token", func(m map[string]types.AttributeValue) { m[attrToken] = &types.AttributeValueMemberB{Value: []byte{1}} }},
		{"kind", func(m map[string]types.AttributeValue) { m[attrKind] = str("other") }},
		{"position", func(m map[string]types.AttributeValue) { m[attrPos] = &types.AttributeValueMemberN{Value: "-3"} }},
		{"no checksum", func(m map[string]types.AttributeValue) { delete(m, attrCRC) }},
	}
	for _, d := range damage {
		t.Run(d.name, func(t *testing.T) {
			item, err := encodeSlot("log:x", slotlog.Slot{Pos: 1, Kind: slotlog.KindEntry, Token: tok, Data: []byte("entry")})
			if err != nil {
				t.Fatal(err)
			}
			d.fn(item)
			if _, err := decodeSlot(item, true); !errors.Is(err, slotlog.ErrCorrupt) {
				t.Fatalf("decodeSlot of a damaged item = %v, want ErrCorrupt", err)
			}
		})
	}
}
