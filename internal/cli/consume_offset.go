// consume's --offset, in rpk's forms: where to start and, after a ':',
// where to stop.

package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// offsetHelp is --offset's part of consume's help, rpk's list of forms.
const offsetHelp = `--offset (-o) takes rpk topic consume's forms; the default is start, as rpk's:
  start            from the log start of each partition (also oldest, beginning)
  end              from the end: only records produced from now on (also newest, latest)
  N                from offset N
  +N               N after the log start
  -N               N before the end
  :end             from the start until the end as of the command's start (as -e)
  :N               from the start until offset N (N not printed)
  N1:N2            from N1 until N2; N1 may be start, end, +N or -N, N2 may be end
  @T               from the first record at or after time T
  @:T              from the start until time T
  @T1:T2           from time T1 until time T2 (records before T2)
A time T is 13 digits (Unix milliseconds), 10 or fewer digits (Unix seconds),
YYYY-MM-DD (a day, UTC), RFC 3339 (2006-01-02T15:04:05Z, fraction optional), or
-DURATION for that long before now (-1h, -90s). As T2 only, a DURATION without
sign means that long after T1 (@-2h:1h). A start past the end clamps to the
end, one before the log start to the log start; a stop offset past the end
waits for records to reach it (with -e, the end as of the start stops first).
With --group only start and end apply, to partitions without a committed
offset, and :end (as -e).`

// offsetRange is a parsed --offset: a start and an optional stop.
type offsetRange struct {
	from offsetSpec
	// until is where to stop, exclusive: offsetEnd (the end as of the
	// start), offsetExact or offsetTime. nil: never.
	until *offsetSpec
}

// hasTime reports whether resolving r needs offsets listed by time.
func (r offsetRange) hasTime() bool {
	return r.from.kind == offsetTime || (r.until != nil && r.until.kind == offsetTime)
}

// parseOffsetRange reads --offset. now is the reference of -DURATION.
func parseOffsetRange(s string, now time.Time) (offsetRange, error) {
	bad := func(why string) (offsetRange, error) {
		return offsetRange{}, fmt.Errorf("%w: --offset %q: %s (see consume --help)", ErrUsage, s, why)
	}
	if rest, ok := strings.CutPrefix(s, "@"); ok {
		if t, err := parseConsumeTime(rest, now); err == nil {
			return offsetRange{from: offsetSpec{kind: offsetTime, n: t.UnixMilli()}}, nil
		}
		// An RFC 3339 time holds colons of its own: try each colon as the
		// separator until both sides parse.
		for i := range len(rest) {
			if rest[i] != ':' {
				continue
			}
			from := offsetSpec{kind: offsetStart}
			var t1 time.Time
			if rest[:i] != "" {
				var err error
				if t1, err = parseConsumeTime(rest[:i], now); err != nil {
					continue
				}
				from = offsetSpec{kind: offsetTime, n: t1.UnixMilli()}
			}
			if rest[i+1:] == "" {
				return offsetRange{from: from}, nil // @T: is @T
			}
			t2, err := parseConsumeTime(rest[i+1:], now)
			if err != nil {
				d, derr := time.ParseDuration(rest[i+1:])
				if derr != nil || d <= 0 || rest[:i] == "" {
					continue
				}
				t2 = t1.Add(d)
			}
			return offsetRange{from: from, until: &offsetSpec{kind: offsetTime, n: t2.UnixMilli()}}, nil
		}
		return bad("want @T, @:T or @T1:T2 with T in Unix ms or s, YYYY-MM-DD, RFC 3339 or -DURATION")
	}
	fromText, untilText, isRange := strings.Cut(s, ":")
	var r offsetRange
	if fromText == "" && isRange {
		r.from = offsetSpec{kind: offsetStart}
	} else {
		from, err := parseOffset(fromText)
		if err != nil {
			return bad("want start, end, N, +N, -N, :end, :N, N1:N2 or @TIME")
		}
		r.from = from
	}
	if !isRange || untilText == "" {
		return r, nil // "N:" is N, as rpk's
	}
	switch untilText {
	case "end", "newest", "latest":
		r.until = &offsetSpec{kind: offsetEnd}
	default:
		n, err := strconv.ParseInt(untilText, 10, 64)
		if err != nil || n < 0 || untilText[0] == '+' {
			return bad("the part after ':' is end or an offset")
		}
		r.until = &offsetSpec{kind: offsetExact, n: n}
	}
	return r, nil
}

// parseConsumeTime reads a time of --offset: Unix ms (13 digits) or
// seconds (at most 10), YYYY-MM-DD, RFC 3339, or -DURATION before now.
func parseConsumeTime(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, fmt.Errorf("empty time")
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && s[0] != '-' && s[0] != '+' {
		switch {
		case len(s) == 13:
			return time.UnixMilli(n), nil
		case len(s) <= 10:
			return time.Unix(n, 0), nil
		}
		return time.Time{}, fmt.Errorf("%s: 13 digits are milliseconds, 10 or fewer seconds", s)
	}
	if d, ok := strings.CutPrefix(s, "-"); ok {
		dur, err := time.ParseDuration(d)
		if err != nil || dur < 0 {
			return time.Time{}, fmt.Errorf("%s: not a duration", s)
		}
		return now.Add(-dur), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	if t.UnixMilli() < 0 {
		return time.Time{}, fmt.Errorf("%s is before 1970", s)
	}
	return t, nil
}

// timeOffsets lists, per partition, the first offset at or after each
// time r names, so resolve can treat them as exact offsets. A time after
// every record resolves to the end, as Kafka's ListOffsets answers it.
func (o *consumeOptions) timeOffsets(ctx context.Context, r offsetRange, topics []string) (from, until kadm.ListedOffsets, err error) {
	cl, err := o.client.NewClient()
	if err != nil {
		return nil, nil, err
	}
	adm := kadm.NewClient(cl)
	defer adm.Close()
	ctx, cancel := o.client.requestContext(ctx)
	defer cancel()
	if r.from.kind == offsetTime {
		if from, err = adm.ListOffsetsAfterMilli(ctx, r.from.n, topics...); err != nil {
			return nil, nil, fmt.Errorf("list offsets at %d ms: %w", r.from.n, err)
		}
		if err := from.Error(); err != nil {
			return nil, nil, fmt.Errorf("list offsets at %d ms: %w", r.from.n, err)
		}
	}
	if r.until != nil && r.until.kind == offsetTime {
		if until, err = adm.ListOffsetsAfterMilli(ctx, r.until.n, topics...); err != nil {
			return nil, nil, fmt.Errorf("list offsets at %d ms: %w", r.until.n, err)
		}
		if err := until.Error(); err != nil {
			return nil, nil, fmt.Errorf("list offsets at %d ms: %w", r.until.n, err)
		}
	}
	return from, until, nil
}

// atTime is the offset listed for tp, or end when none was (no record at
// or after the time).
func atTime(l kadm.ListedOffsets, tp topicPartition, end int64) int64 {
	if o, ok := l.Lookup(tp.topic, tp.partition); ok && o.Err == nil && o.Offset >= 0 {
		return o.Offset
	}
	return end
}
