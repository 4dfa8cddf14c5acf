package dynamolog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/strandkafka/strand/internal/retry"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/slotlog"
)

const (
	// maxChainItemBytes bounds a stored chain below the item limit; a
	// chain this long means trimming has stopped dropping segments.
	maxChainItemBytes = 350 << 10
	// casAttempts bounds a CAS whose outcome stays unknown.
	casAttempts = 3
)

// casRetry paces the tries of one CAS: after an unknown outcome the next
// try, or the read after a failed condition, tells whether the earlier
// one won.
var casRetry = retry.Policy{Attempts: casAttempts, Min: 50 * time.Millisecond, Max: time.Second}

// MetaStore is a sharedlog.MetaStore in one item: CAS is a PutItem
// conditional on the stored version. Safe for concurrent use.
type MetaStore struct {
	db *DB
	pk string
}

var _ sharedlog.MetaStore = (*MetaStore)(nil)

// MetaStore returns the register named name.
func (db *DB) MetaStore(name string) (*MetaStore, error) {
	if name == "" || len(name) > MaxLogIDBytes {
		return nil, fmt.Errorf("dynamolog: MetaStore name must be 1 to %d bytes", MaxLogIDBytes)
	}
	return &MetaStore{db: db, pk: "chain:" + name}, nil
}

func (m *MetaStore) key() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrLog: str(m.pk), attrPos: num(0)}
}

func (m *MetaStore) Get(ctx context.Context) (sharedlog.Chain, error) {
	if err := ctx.Err(); err != nil {
		return sharedlog.Chain{}, err
	}
	if err := m.db.ensure(ctx); err != nil {
		return sharedlog.Chain{}, err
	}
	b, ok, err := m.read(ctx)
	if err != nil || !ok {
		return sharedlog.Chain{}, err
	}
	return sharedlog.DecodeChain(b)
}

// read returns the stored encoded chain, checking the version attribute
// against it.
func (m *MetaStore) read(ctx context.Context) ([]byte, bool, error) {
	out, err := m.db.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(m.db.table),
		Key:            m.key(),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, false, fmt.Errorf("dynamolog: read chain: %w", err)
	}
	if len(out.Item) == 0 {
		return nil, false, nil
	}
	return decodeChainItem(out.Item)
}

func decodeChainItem(item map[string]types.AttributeValue) ([]byte, bool, error) {
	c, ok := item[attrChain].(*types.AttributeValueMemberS)
	v, vok := item[attrVer].(*types.AttributeValueMemberN)
	if !ok || !vok {
		return nil, false, fmt.Errorf("%w: chain item lacks %s or %s", sharedlog.ErrInvalidChain, attrChain, attrVer)
	}
	chain, err := sharedlog.DecodeChain([]byte(c.Value))
	if err != nil {
		return nil, false, err
	}
	if strconv.FormatUint(chain.Version, 10) != v.Value {
		return nil, false, fmt.Errorf("%w: item version %s holds chain version %d", sharedlog.ErrInvalidChain, v.Value, chain.Version)
	}
	return []byte(c.Value), true, nil
}

func (m *MetaStore) CAS(ctx context.Context, expect uint64, next sharedlog.Chain) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sharedlog.CheckCAS(expect, next); err != nil {
		return err
	}
	if err := m.db.ensure(ctx); err != nil {
		return err
	}
	b, err := sharedlog.EncodeChain(next)
	if err != nil {
		return err
	}
	if len(b) > maxChainItemBytes {
		return fmt.Errorf("dynamolog: chain of %d bytes does not fit an item (at most %d)", len(b), maxChainItemBytes)
	}
	in := &dynamodb.PutItemInput{
		TableName: aws.String(m.db.table),
		Item: map[string]types.AttributeValue{
			attrLog:   str(m.pk),
			attrPos:   num(0),
			attrVer:   &types.AttributeValueMemberN{Value: strconv.FormatUint(next.Version, 10)},
			attrChain: str(string(b)),
		},
		ExpressionAttributeNames:            map[string]string{"#x": attrPos},
		ConditionExpression:                 aws.String("attribute_not_exists(#x)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if expect > 0 {
		in.ExpressionAttributeNames = map[string]string{"#x": attrVer}
		in.ConditionExpression = aws.String("#x = :v")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":v": &types.AttributeValueMemberN{Value: strconv.FormatUint(expect, 10)},
		}
	}
	ambiguous := false
	var lastErr error
	loop := casRetry.Start(ctx, nil)
	for loop.Next() {
		_, err := m.db.client.PutItem(ctx, in, noRetry)
		if err == nil {
			return nil
		}
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			if ambiguous {
				// An earlier try may be what the condition met.
				stored, ok, rerr := m.stored(ctx, ccf.Item)
				if rerr != nil {
					return fmt.Errorf("dynamolog: CAS outcome unknown: %w", rerr)
				}
				if ok && bytes.Equal(stored, b) {
					return nil
				}
			}
			return fmt.Errorf("dynamolog: CAS expecting version %d: %w", expect, sharedlog.ErrConflict)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("dynamolog: CAS outcome unknown: %w", err)
		}
		if rerr := classify("CAS", err); errors.Is(rerr, slotlog.ErrRejected) && !ambiguous {
			return rerr // not applied
		}
		ambiguous, lastErr = true, err
	}
	if err := loop.Err(); !errors.Is(err, retry.ErrExhausted) {
		return fmt.Errorf("dynamolog: CAS outcome unknown: %w (after: %w)", err, lastErr)
	}
	return fmt.Errorf("dynamolog: CAS outcome unknown after %d attempts: %w", casAttempts, lastErr)
}

// stored returns the chain the failed condition met: from the item the
// service returned, else read again.
func (m *MetaStore) stored(ctx context.Context, item map[string]types.AttributeValue) ([]byte, bool, error) {
	if len(item) > 0 {
		return decodeChainItem(item)
	}
	return m.read(ctx)
}
