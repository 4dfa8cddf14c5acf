package dynamolog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/strandkafka/strand/internal/retry"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/slotlog"
)

const (
	// trimSortKey is the trim point item's sort key, below every slot.
	trimSortKey = -1
	// maxBatchDeletes is BatchWriteItem's limit.
	maxBatchDeletes = 25
	// maxDeletesPerCall bounds the slots one DeleteBelow removes; the
	// next trim finishes the rest.
	maxDeletesPerCall = 100_000
	// maxUnprocessedRetries bounds re-sending a batch's unprocessed
	// deletes (DynamoDB returns them under throttling).
	maxUnprocessedRetries = 8
	// maxScanPages bounds the pages one scan reads: a page is at most
	// 1 MB, so a scan of Window+1 items of 400 KB needs a few.
	maxScanPages = 64
)

// unprocessedRetry paces re-sending unprocessed deletes.
var unprocessedRetry = retry.Policy{Attempts: maxUnprocessedRetries, Min: 20 * time.Millisecond, Max: time.Second}

const (
	kindEntry = "entry"
	kindSeal  = "seal"
)

// store is a slotlog.Slots over the items of one partition key.
type store struct {
	db *DB
	pk string
}

var _ slotlog.Slots = (*store)(nil)

// noRetry turns the SDK's retries off for a conditional write: a retry of
// a put whose reply was lost would meet its own write, and slotlog must
// see that as an unknown outcome, not a lost slot.
func noRetry(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func posNum(p sharedlog.Pos) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatUint(uint64(p), 10)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func (s *store) key(p sharedlog.Pos) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrLog: str(s.pk), attrPos: posNum(p)}
}

func (s *store) trimKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrLog: str(s.pk), attrPos: num(trimSortKey)}
}

// classify marks errors the service definitely did not apply and that
// repeating will not fix.
func classify(op string, err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ValidationException", "ResourceNotFoundException", "AccessDeniedException",
			"UnrecognizedClientException", "SerializationException", "ItemCollectionSizeLimitExceededException":
			return fmt.Errorf("dynamolog: %s: %w: %w", op, slotlog.ErrRejected, err)
		}
	}
	return fmt.Errorf("dynamolog: %s: %w", op, err)
}

func encodeSlot(pk string, s slotlog.Slot) (map[string]types.AttributeValue, error) {
	item := map[string]types.AttributeValue{
		attrLog:   str(pk),
		attrPos:   posNum(s.Pos),
		attrToken: &types.AttributeValueMemberB{Value: s.Token[:]},
	}
	switch s.Kind {
	case slotlog.KindEntry:
		item[attrKind] = str(kindEntry)
		item[attrCRC] = num(int64(slotlog.Checksum(s.Data)))
		if len(s.Data) > 0 {
			item[attrData] = &types.AttributeValueMemberB{Value: s.Data}
		}
	case slotlog.KindSeal:
		if len(s.Data) > 0 {
			return nil, fmt.Errorf("dynamolog: seal with %d bytes of data", len(s.Data))
		}
		item[attrKind] = str(kindSeal)
	default:
		return nil, fmt.Errorf("dynamolog: slot %d of kind %v", s.Pos, s.Kind)
	}
	return item, nil
}

func decodeKind(item map[string]types.AttributeValue) (slotlog.Kind, error) {
	k, ok := item[attrKind].(*types.AttributeValueMemberS)
	if !ok {
		return 0, fmt.Errorf("%w: no kind", slotlog.ErrCorrupt)
	}
	switch k.Value {
	case kindEntry:
		return slotlog.KindEntry, nil
	case kindSeal:
		return slotlog.KindSeal, nil
	}
	return 0, fmt.Errorf("%w: kind %q", slotlog.ErrCorrupt, k.Value)
}

func decodePos(item map[string]types.AttributeValue) (sharedlog.Pos, error) {
	n, ok := item[attrPos].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("%w: no position", slotlog.ErrCorrupt)
	}
	p, err := strconv.ParseUint(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: position %q", slotlog.ErrCorrupt, n.Value)
	}
	return sharedlog.Pos(p), nil
}

// decodeSlot reads a slot item; with data, it checks the checksum.
func decodeSlot(item map[string]types.AttributeValue, withData bool) (slotlog.Slot, error) {
	var s slotlog.Slot
	var err error
	if s.Pos, err = decodePos(item); err != nil {
		return s, err
	}
	if s.Kind, err = decodeKind(item); err != nil {
		return s, fmt.Errorf("slot %d: %w", s.Pos, err)
	}
	tok, ok := item[attrToken].(*types.AttributeValueMemberB)
	if !ok || len(tok.Value) != len(s.Token) {
		return s, fmt.Errorf("%w: slot %d has no token", slotlog.ErrCorrupt, s.Pos)
	}
	copy(s.Token[:], tok.Value)
	if !withData || s.Kind != slotlog.KindEntry {
		return s, nil
	}
	s.Data = []byte{}
	if d, ok := item[attrData].(*types.AttributeValueMemberB); ok {
		s.Data = d.Value
	}
	c, ok := item[attrCRC].(*types.AttributeValueMemberN)
	if !ok {
		return s, fmt.Errorf("%w: slot %d has no checksum", slotlog.ErrCorrupt, s.Pos)
	}
	want, err := strconv.ParseUint(c.Value, 10, 32)
	if err != nil || uint32(want) != slotlog.Checksum(s.Data) {
		return s, fmt.Errorf("%w: slot %d: checksum mismatch", slotlog.ErrCorrupt, s.Pos)
	}
	return s, nil
}

func (s *store) Put(ctx context.Context, sl slotlog.Slot) (*slotlog.Slot, error) {
	item, err := encodeSlot(s.pk, sl)
	if err != nil {
		return nil, err
	}
	_, err = s.db.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.db.table),
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(#p)"),
		ExpressionAttributeNames:            map[string]string{"#p": attrPos},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, noRetry)
	if err == nil {
		return nil, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return nil, classify(fmt.Sprintf("put slot %d", sl.Pos), err)
	}
	if len(ccf.Item) == 0 {
		return nil, slotlog.ErrTaken // dynalite does not return the occupant
	}
	occ, derr := decodeSlot(ccf.Item, false)
	if derr != nil {
		return nil, derr
	}
	return &occ, slotlog.ErrTaken
}

func (s *store) Probe(ctx context.Context, p sharedlog.Pos) (slotlog.Slot, bool, error) {
	out, err := s.db.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(s.db.table),
		Key:                      s.key(p),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#p, #k, #t"),
		ExpressionAttributeNames: map[string]string{"#p": attrPos, "#k": attrKind, "#t": attrToken},
	})
	if err != nil {
		return slotlog.Slot{}, false, classify(fmt.Sprintf("probe slot %d", p), err)
	}
	if len(out.Item) == 0 {
		return slotlog.Slot{}, false, nil
	}
	sl, err := decodeSlot(out.Item, false)
	return sl, err == nil, err
}

func (s *store) Read(ctx context.Context, from, to sharedlog.Pos) ([]slotlog.Slot, error) {
	if to <= from {
		return nil, nil
	}
	// One page: at most 1 MB, which bounds one ReadNext.
	out, err := s.db.client.Query(ctx, &dynamodb.QueryInput{
		TableName:                aws.String(s.db.table),
		KeyConditionExpression:   aws.String("#l = :l AND #p BETWEEN :a AND :b"),
		ExpressionAttributeNames: map[string]string{"#l": attrLog, "#p": attrPos},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":l": str(s.pk), ":a": posNum(from), ":b": posNum(to - 1),
		},
		ConsistentRead: aws.Bool(true),
		Limit:          aws.Int32(int32(min(to-from, 1<<20))),
	})
	if err != nil {
		return nil, classify(fmt.Sprintf("read slots [%d, %d)", from, to), err)
	}
	slots := make([]slotlog.Slot, 0, len(out.Items))
	for _, item := range out.Items {
		sl, err := decodeSlot(item, true)
		if err != nil {
			return nil, err
		}
		slots = append(slots, sl)
	}
	return slots, nil
}

// scan pages through a Query of slot positions and kinds until limit
// items or the end.
func (s *store) scan(ctx context.Context, op, cond string, values map[string]types.AttributeValue, forward bool, limit int) ([]slotlog.SlotInfo, error) {
	values[":l"] = str(s.pk)
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.db.table),
		KeyConditionExpression:    aws.String("#l = :l AND " + cond),
		ExpressionAttributeNames:  map[string]string{"#l": attrLog, "#p": attrPos, "#k": attrKind},
		ExpressionAttributeValues: values,
		ProjectionExpression:      aws.String("#p, #k"),
		ConsistentRead:            aws.Bool(true),
		ScanIndexForward:          aws.Bool(forward),
	}
	var infos []slotlog.SlotInfo
	for range maxScanPages {
		in.Limit = aws.Int32(int32(limit - len(infos)))
		out, err := s.db.client.Query(ctx, in)
		if err != nil {
			return nil, classify(op, err)
		}
		for _, item := range out.Items {
			p, err := decodePos(item)
			if err != nil {
				return nil, err
			}
			k, err := decodeKind(item)
			if err != nil {
				return nil, fmt.Errorf("slot %d: %w", p, err)
			}
			infos = append(infos, slotlog.SlotInfo{Pos: p, Kind: k})
		}
		if len(infos) >= limit || len(out.LastEvaluatedKey) == 0 {
			return infos, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	return nil, fmt.Errorf("dynamolog: %s: more than %d pages", op, maxScanPages)
}

func (s *store) ScanUp(ctx context.Context, from sharedlog.Pos, limit int) ([]slotlog.SlotInfo, error) {
	return s.scan(ctx, fmt.Sprintf("scan from slot %d", from), "#p >= :a",
		map[string]types.AttributeValue{":a": posNum(from)}, true, limit)
}

func (s *store) ScanTop(ctx context.Context, limit int) ([]slotlog.SlotInfo, error) {
	return s.scan(ctx, "scan top slots", "#p >= :a",
		map[string]types.AttributeValue{":a": num(0)}, false, limit)
}

func (s *store) TrimPoint(ctx context.Context) (sharedlog.Pos, error) {
	out, err := s.db.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.db.table),
		Key:            s.trimKey(),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return 0, classify("read trim point", err)
	}
	v, ok := out.Item[attrTrim].(*types.AttributeValueMemberN)
	if !ok {
		return 0, nil
	}
	tp, err := strconv.ParseUint(v.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: trim point %q", slotlog.ErrCorrupt, v.Value)
	}
	return sharedlog.Pos(tp), nil
}

func (s *store) RaiseTrimPoint(ctx context.Context, p sharedlog.Pos) error {
	_, err := s.db.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.db.table),
		Key:                       s.trimKey(),
		UpdateExpression:          aws.String("SET #t = :p"),
		ConditionExpression:       aws.String("attribute_not_exists(#t) OR #t < :p"),
		ExpressionAttributeNames:  map[string]string{"#t": attrTrim},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": posNum(p)},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // already at or past p
	}
	if err != nil {
		return classify(fmt.Sprintf("raise trim point to %d", p), err)
	}
	return nil
}

func (s *store) DeleteBelow(ctx context.Context, p sharedlog.Pos) error {
	if p == 0 {
		return nil
	}
	for deleted := 0; deleted < maxDeletesPerCall; {
		infos, err := s.scan(ctx, fmt.Sprintf("scan slots below %d", p), "#p BETWEEN :a AND :b",
			map[string]types.AttributeValue{":a": num(0), ":b": posNum(p - 1)}, true, maxBatchDeletes)
		if err != nil {
			return err
		}
		if len(infos) == 0 {
			return nil
		}
		reqs := make([]types.WriteRequest, len(infos))
		for i, in := range infos {
			reqs[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: s.key(in.Pos)}}
		}
		if err := s.batchDelete(ctx, reqs); err != nil {
			return err
		}
		deleted += len(infos)
	}
	return nil
}

// batchDelete sends one batch, re-sending what the service left
// unprocessed a bounded number of times. Deleting is idempotent, so
// this is a retry the backend may own.
func (s *store) batchDelete(ctx context.Context, reqs []types.WriteRequest) error {
	loop := unprocessedRetry.Start(ctx, nil)
	for loop.Next() {
		out, err := s.db.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
			RequestItems: map[string][]types.WriteRequest{s.db.table: reqs},
		})
		if err != nil {
			return classify("delete slots", err)
		}
		if reqs = out.UnprocessedItems[s.db.table]; len(reqs) == 0 {
			return nil
		}
	}
	if err := loop.Err(); !errors.Is(err, retry.ErrExhausted) {
		return err
	}
	return fmt.Errorf("dynamolog: delete slots: %d still unprocessed after %d tries", len(reqs), maxUnprocessedRetries)
}
