package s3log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/slotlog"
)

const (
	// maxDeletesPerCall bounds the slots one DeleteBelow removes; the
	// next trim finishes the rest.
	maxDeletesPerCall = 100_000
	// maxListPages bounds the pages one ScanTop follows (a server may
	// return fewer keys than asked for).
	maxListPages = 16
	// maxTrimRaces bounds RaiseTrimPoint's read-CAS loop against other
	// trimmers.
	maxTrimRaces = 16
	// maxTrimObjectBytes bounds the trim point object.
	maxTrimObjectBytes = 64
)

// store is a slotlog.Slots over the objects under one prefix.
type store struct {
	client   *s3.Client
	bucket   string
	prefix   string
	listKeys int32
}

var _ slotlog.Slots = (*store)(nil)

// noRetry turns the SDK's retries off for a conditional write: a retry of
// a put whose reply was lost would meet its own write, and slotlog must
// see that as an unknown outcome, not a lost slot.
func noRetry(o *s3.Options) { o.RetryMaxAttempts = 1 }

// rangedRead lets a ranged GET through on servers that send the whole
// object's checksum with a part of it (gofakes3), which the SDK would
// otherwise reject.
func rangedRead(o *s3.Options) {
	o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
}

func (s *store) slotsPrefix() string { return s.prefix + "slots/" }

// slotKey complements the position so keys sort newest first.
func (s *store) slotKey(p sharedlog.Pos) string {
	return fmt.Sprintf("%s%016x", s.slotsPrefix(), ^uint64(p))
}

func (s *store) parseSlotKey(key string) (sharedlog.Pos, error) {
	hex, ok := strings.CutPrefix(key, s.slotsPrefix())
	if !ok || len(hex) != 16 {
		return 0, fmt.Errorf("%w: key %q is no slot", slotlog.ErrCorrupt, key)
	}
	v, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: key %q is no slot", slotlog.ErrCorrupt, key)
	}
	return sharedlog.Pos(^v), nil
}

func (s *store) trimKey() string { return s.prefix + "trim" }

func (s *store) Put(ctx context.Context, sl slotlog.Slot) (*slotlog.Slot, error) {
	body, err := encodeSlot(sl)
	if err != nil {
		return nil, err
	}
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.slotKey(sl.Pos)),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		IfNoneMatch:   aws.String("*"),
	}, noRetry)
	switch {
	case err == nil:
		return nil, nil
	case statusCode(err) == http.StatusPreconditionFailed:
		return nil, slotlog.ErrTaken
	}
	// 409 (a racing conditional write in progress) was not applied;
	// slotlog retries it like an unknown outcome.
	return nil, classify(fmt.Sprintf("put slot %d", sl.Pos), err)
}

func (s *store) Probe(ctx context.Context, p sharedlog.Pos) (slotlog.Slot, bool, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.slotKey(p)),
		Range:  aws.String(fmt.Sprintf("bytes=0-%d", entryHeader-1)),
	}, rangedRead)
	if err != nil {
		if isNotFound(err) {
			return slotlog.Slot{}, false, nil
		}
		return slotlog.Slot{}, false, classify(fmt.Sprintf("probe slot %d", p), err)
	}
	b, err := readAll(fmt.Sprintf("probe slot %d", p), out.Body, entryHeader)
	if err != nil {
		return slotlog.Slot{}, false, err
	}
	sl, err := decodeSlot(p, b, true)
	return sl, err == nil, err
}

func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	return errors.As(err, &nsk) || statusCode(err) == http.StatusNotFound
}

// get reads slot p whole; ok is false if it is empty.
func (s *store) get(ctx context.Context, p sharedlog.Pos) (slotlog.Slot, bool, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.slotKey(p)),
	})
	if err != nil {
		if isNotFound(err) {
			return slotlog.Slot{}, false, nil
		}
		return slotlog.Slot{}, false, classify(fmt.Sprintf("read slot %d", p), err)
	}
	b, err := readAll(fmt.Sprintf("read slot %d", p), out.Body, entryHeader+MaxEntryBytesLimit)
	if err != nil {
		return slotlog.Slot{}, false, err
	}
	sl, err := decodeSlot(p, b, false)
	return sl, err == nil, err
}

// Read GETs the slots of [from, to) in waves of readConcurrency and stops
// at the first empty slot or once it holds maxReadBytes.
func (s *store) Read(ctx context.Context, from, to sharedlog.Pos) ([]slotlog.Slot, error) {
	to = min(to, from+maxReadEntries)
	var out []slotlog.Slot
	bytesRead := 0
	for wave := from; wave < to && bytesRead < maxReadBytes; wave += readConcurrency {
		n := int(min(to-wave, readConcurrency))
		slots := make([]slotlog.Slot, n)
		found := make([]bool, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { slots[i], found[i], errs[i] = s.get(ctx, wave+sharedlog.Pos(i)) })
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				if len(out) > 0 {
					return out, nil // the caller reads on from there
				}
				return nil, errs[i]
			}
			if !found[i] {
				return out, nil
			}
			out = append(out, slots[i])
			bytesRead += len(slots[i].Data)
		}
	}
	return out, nil
}

func (s *store) ScanUp(context.Context, sharedlog.Pos, int) ([]slotlog.SlotInfo, error) {
	return nil, errors.ErrUnsupported
}

// ScanTop lists the first keys under the slots prefix: the newest slots.
func (s *store) ScanTop(ctx context.Context, limit int) ([]slotlog.SlotInfo, error) {
	in := &s3.ListObjectsV2Input{
		Bucket:     aws.String(s.bucket),
		Prefix:     aws.String(s.slotsPrefix()),
		StartAfter: aws.String(s.slotsPrefix()),
	}
	var infos []slotlog.SlotInfo
	for range maxListPages {
		in.MaxKeys = aws.Int32(int32(limit - len(infos)))
		out, err := s.client.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, classify("list top slots", err)
		}
		for _, obj := range out.Contents {
			if len(infos) == limit {
				break
			}
			p, err := s.parseSlotKey(aws.ToString(obj.Key))
			if err != nil {
				return nil, err
			}
			k := slotlog.KindEntry
			switch size := aws.ToInt64(obj.Size); {
			case size == sealSize:
				k = slotlog.KindSeal
			case size < entryHeader:
				return nil, fmt.Errorf("%w: slot %d object of %d bytes", slotlog.ErrCorrupt, p, size)
			}
			infos = append(infos, slotlog.SlotInfo{Pos: p, Kind: k})
		}
		if len(infos) >= limit || !aws.ToBool(out.IsTruncated) {
			return infos, nil
		}
		in.ContinuationToken = out.NextContinuationToken
	}
	return nil, fmt.Errorf("s3log: list top slots: more than %d pages", maxListPages)
}

// trimPoint reads the trim point object and its ETag ("" if absent).
func (s *store) trimPoint(ctx context.Context) (sharedlog.Pos, string, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.trimKey()),
	})
	if err != nil {
		if isNotFound(err) {
			return 0, "", nil
		}
		return 0, "", classify("read trim point", err)
	}
	b, err := readAll("read trim point", out.Body, maxTrimObjectBytes)
	if err != nil {
		return 0, "", err
	}
	tp, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("%w: trim point %q", slotlog.ErrCorrupt, b)
	}
	return sharedlog.Pos(tp), aws.ToString(out.ETag), nil
}

func (s *store) TrimPoint(ctx context.Context) (sharedlog.Pos, error) {
	tp, _, err := s.trimPoint(ctx)
	return tp, err
}

// RaiseTrimPoint replaces the trim point object by compare-and-swap on
// its ETag, so racing trimmers never lower it.
func (s *store) RaiseTrimPoint(ctx context.Context, p sharedlog.Pos) error {
	body := []byte(strconv.FormatUint(uint64(p), 10))
	for range maxTrimRaces {
		cur, etag, err := s.trimPoint(ctx)
		if err != nil {
			return err
		}
		if cur >= p {
			return nil
		}
		in := &s3.PutObjectInput{
			Bucket:        aws.String(s.bucket),
			Key:           aws.String(s.trimKey()),
			Body:          bytes.NewReader(body),
			ContentLength: aws.Int64(int64(len(body))),
		}
		if etag == "" {
			in.IfNoneMatch = aws.String("*")
		} else {
			in.IfMatch = aws.String(etag)
		}
		_, err = s.client.PutObject(ctx, in, noRetry)
		switch code := statusCode(err); {
		case err == nil:
			return nil
		case code == http.StatusPreconditionFailed, code == http.StatusConflict:
			continue // another trimmer moved it; read again
		default:
			return classify(fmt.Sprintf("raise trim point to %d", p), err)
		}
	}
	return fmt.Errorf("s3log: raise trim point to %d: lost %d races", p, maxTrimRaces)
}

// DeleteBelow lists the slots below p (they sort after p's key) and
// deletes them a page at a time.
func (s *store) DeleteBelow(ctx context.Context, p sharedlog.Pos) error {
	if p == 0 {
		return nil
	}
	for deleted := 0; deleted < maxDeletesPerCall; {
		out, err := s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
			Bucket:     aws.String(s.bucket),
			Prefix:     aws.String(s.slotsPrefix()),
			StartAfter: aws.String(s.slotKey(p)),
			MaxKeys:    aws.Int32(s.listKeys),
		})
		if err != nil {
			return classify(fmt.Sprintf("list slots below %d", p), err)
		}
		if len(out.Contents) == 0 {
			return nil
		}
		ids := make([]types.ObjectIdentifier, 0, len(out.Contents))
		for _, obj := range out.Contents {
			q, err := s.parseSlotKey(aws.ToString(obj.Key))
			if err != nil {
				return err
			}
			if q >= p {
				return fmt.Errorf("%w: listing below %d returned slot %d", slotlog.ErrCorrupt, p, q)
			}
			ids = append(ids, types.ObjectIdentifier{Key: obj.Key})
		}
		del, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(s.bucket),
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return classify(fmt.Sprintf("delete slots below %d", p), err)
		}
		if len(del.Errors) > 0 {
			e := del.Errors[0]
			return fmt.Errorf("s3log: delete slots below %d: %d failed, first %s: %s", p, len(del.Errors), aws.ToString(e.Key), aws.ToString(e.Message))
		}
		deleted += len(ids)
	}
	return nil
}
