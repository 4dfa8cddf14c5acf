package types

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/strandkafka/strand/internal/sql/sqlerr"
)

// The time forms read are ISO 8601's, which DateStyle ISO writes:
// "2024-01-02", "2024-01-02 03:04:05.123456", a "T" in place of the
// space, an optional zone (Z, UTC, +HH, +HH:MM, +HHMM) and " BC", and
// a date's digits run together (YYYYMMDD, YYMMDD) as PostgreSQL reads
// them. Errors carry PostgreSQL's codes: 22008 for a field out of range,
// 22009 for a zone beyond 15:59, 22007 for text not read.
// PostgreSQL reads many more (month names, other orders); those are
// 22007 here until a source needs them.

func badDatetime(t Type, text string) *sqlerr.Error {
	return sqlerr.Errorf(sqlerr.InvalidDatetimeFormat, "invalid input syntax for type %s: %q", t.Name(), text)
}

func datetimeOverflow(text string) *sqlerr.Error {
	return sqlerr.Errorf(sqlerr.DatetimeFieldOverflow, "date/time field value out of range: %q", text)
}

// clockError is the error for text whose time of day parseClock or
// parseZone refused with err, PostgreSQL's code for each.
func clockError(t Type, text string, err error) *sqlerr.Error {
	switch err {
	case errClockRange:
		return datetimeOverflow(text)
	case errZoneRange:
		return sqlerr.Errorf(sqlerr.InvalidTimeZoneDisplacementValue, "time zone displacement out of range: %q", text)
	}
	return badDatetime(t, text)
}

// maxYear is the last year a timestamp holds (PostgreSQL's 294276 AD).
const maxYear = 294276

// ParseDate is date_in for ISO dates; a time after the date is ignored.
func ParseDate(text string) (time.Time, error) {
	s := strings.TrimSpace(text)
	s, bc := cutBC(s)
	y, m, d, rest, ok := parseYMD(s)
	if !ok {
		return time.Time{}, badDatetime(Date, text)
	}
	if y > maxYear {
		return time.Time{}, datetimeOverflow(text)
	}
	if rest != "" {
		if _, err := parseClock(strings.TrimLeft(rest, " T"), true); err != nil {
			return time.Time{}, clockError(Date, text, err)
		}
	}
	if bc {
		y = 1 - y
	}
	if !validDate(y, m, d) {
		return time.Time{}, datetimeOverflow(text)
	}
	return time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC), nil
}

func cutBC(s string) (string, bool) {
	if len(s) > 3 && strings.EqualFold(s[len(s)-3:], " bc") {
		return strings.TrimSpace(s[:len(s)-3]), true
	}
	return s, false
}

func validDate(y, m, d int) bool {
	if m < 1 || m > 12 || d < 1 {
		return false
	}
	return d <= time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// parseYMD reads YYYY-MM-DD at the start of s, or the digits of a
// date run together as PostgreSQL reads them (YYYYMMDD; 6 digits are
// YYMMDD). A run-together year may exceed maxYear: the caller's 22008.
func parseYMD(s string) (y, m, d int, rest string, ok bool) {
	if y, m, d, rest, ok := parseRunTogether(s); ok {
		return y, m, d, rest, true
	}
	parts := strings.SplitN(s, "-", 3)
	if len(parts) != 3 {
		return 0, 0, 0, "", false
	}
	end := 0
	for end < len(parts[2]) && parts[2][end] >= '0' && parts[2][end] <= '9' {
		end++
	}
	var err1, err2, err3 error
	y, err1 = strconv.Atoi(parts[0])
	m, err2 = strconv.Atoi(parts[1])
	d, err3 = strconv.Atoi(parts[2][:end])
	if err1 != nil || err2 != nil || err3 != nil || len(parts[0]) < 1 || y < 0 || y > maxYear {
		return 0, 0, 0, "", false
	}
	return y, m, d, parts[2][end:], true
}

// parseRunTogether reads a date of at least six digits with nothing
// between them, as DecodeNumberField does: the last two are the day,
// the two before the month, the rest the year (two digits: 1970-2069).
func parseRunTogether(s string) (y, m, d int, rest string, ok bool) {
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	if end < 6 || (end < len(s) && s[end] != ' ' && s[end] != 'T' && s[end] != 't') {
		return 0, 0, 0, "", false
	}
	digits := s[:end]
	y, err := strconv.Atoi(digits[:end-4])
	if err != nil {
		y = maxYear + 1 // too many digits for an int: out of range all the same
	}
	m, _ = strconv.Atoi(digits[end-4 : end-2])
	d, _ = strconv.Atoi(digits[end-2:])
	if end == 6 {
		if y < 70 {
			y += 2000
		} else {
			y += 1900
		}
	}
	return y, m, d, s[end:], true
}

// clock is a time of day with an optional zone offset.
type clockTime struct {
	micros  int64
	offset  int // seconds east of UTC
	hasZone bool
}

// parseClock reads HH:MM[:SS[.ffffff]][zone]; allowZone admits a zone.
func parseClock(s string, allowZone bool) (clockTime, error) {
	var c clockTime
	zoneAt := strings.IndexAny(s, "+-Zz ")
	body := s
	zone := ""
	if zoneAt >= 0 {
		body, zone = s[:zoneAt], strings.TrimSpace(s[zoneAt:])
	}
	fields := strings.Split(body, ":")
	if len(fields) < 2 || len(fields) > 3 {
		return c, errBadClock
	}
	h, err1 := strconv.Atoi(fields[0])
	mi, err2 := strconv.Atoi(fields[1])
	if err1 != nil || err2 != nil || len(fields[0]) > 2 || len(fields[1]) < 1 || len(fields[1]) > 2 {
		return c, errBadClock
	}
	var secMicros int64
	if len(fields) == 3 {
		secText, frac, _ := strings.Cut(fields[2], ".")
		sec, err := strconv.Atoi(secText)
		if err != nil || len(secText) < 1 || len(secText) > 2 {
			return c, errBadClock
		}
		secMicros = int64(sec) * microsPerSecond
		if frac != "" {
			if len(frac) > 6 {
				// Round to microseconds, half up, as PostgreSQL does.
				f, err := strconv.ParseFloat("0."+frac, 64)
				if err != nil {
					return c, errBadClock
				}
				secMicros += int64(math.Round(f * microsPerSecond))
			} else {
				n, err := strconv.Atoi(frac + strings.Repeat("0", 6-len(frac)))
				if err != nil {
					return c, errBadClock
				}
				secMicros += int64(n)
			}
		}
		if sec > 60 {
			return c, errClockRange
		}
	}
	if h > 24 || mi > 59 || (h == 24 && (mi != 0 || secMicros != 0)) {
		return c, errClockRange
	}
	c.micros = int64(h)*3600*microsPerSecond + int64(mi)*60*microsPerSecond + secMicros
	if zone != "" {
		if !allowZone {
			return c, errBadClock
		}
		off, err := parseZone(zone)
		if err != nil {
			return c, err
		}
		c.offset, c.hasZone = off, true
	}
	return c, nil
}

type clockErr string

func (e clockErr) Error() string { return string(e) }

const (
	errBadClock   = clockErr("bad time")
	errClockRange = clockErr("time out of range")
	errZoneRange  = clockErr("time zone displacement out of range")
)

// parseZone reads a zone's offset east of UTC in seconds; an offset
// beyond PostgreSQL's 15:59 is errZoneRange, other text errBadClock.
func parseZone(z string) (int, error) {
	switch strings.ToUpper(z) {
	case "Z", "UTC", "GMT", "+00", "-00":
		return 0, nil
	}
	if len(z) < 2 || (z[0] != '+' && z[0] != '-') {
		return 0, errBadClock
	}
	sign := 1
	if z[0] == '-' {
		sign = -1
	}
	rest := strings.ReplaceAll(z[1:], ":", "")
	var h, m int
	var err error
	switch len(rest) {
	case 1, 2:
		h, err = strconv.Atoi(rest)
	case 4:
		h, err = strconv.Atoi(rest[:2])
		if err == nil {
			m, err = strconv.Atoi(rest[2:])
		}
	default:
		return 0, errBadClock
	}
	if err != nil {
		return 0, errBadClock
	}
	if h > 15 || m > 59 {
		return 0, errZoneRange
	}
	return sign * (h*3600 + m*60), nil
}

// ParseTimestamp is timestamp_in (tz false: a zone is ignored, as
// PostgreSQL does) and timestamptz_in (tz: a zone converts to UTC; none
// means the session's, which is UTC).
func ParseTimestamp(text string, tz bool) (time.Time, error) {
	if t, ok := parseISOTimestamp(text); ok {
		return t, nil
	}
	return parseTimestamp(text, tz)
}

// parseTimestamp is timestamp_in and timestamptz_in, every form.
func parseTimestamp(text string, tz bool) (time.Time, error) {
	typ := Timestamp
	if tz {
		typ = TimestampTZ
	}
	s := strings.TrimSpace(text)
	s, bc := cutBC(s)
	y, m, d, rest, ok := parseYMD(s)
	if !ok {
		return time.Time{}, badDatetime(typ, text)
	}
	if y > maxYear {
		return time.Time{}, datetimeOverflow(text)
	}
	var c clockTime
	if rest = strings.TrimLeft(rest, " "); rest != "" {
		if rest[0] == 'T' || rest[0] == 't' {
			rest = rest[1:]
		}
		if off, err := parseZone(rest); err == nil {
			c.offset, c.hasZone = off, true
		} else if err == errZoneRange {
			return time.Time{}, clockError(typ, text, err)
		} else {
			c, err = parseClock(rest, true)
			if err != nil {
				return time.Time{}, clockError(typ, text, err)
			}
		}
	}
	if bc {
		y = 1 - y
	}
	if !validDate(y, m, d) {
		return time.Time{}, datetimeOverflow(text)
	}
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC).Add(time.Duration(c.micros) * time.Microsecond)
	if tz && c.hasZone {
		t = t.Add(-time.Duration(c.offset) * time.Second)
	}
	return t, nil
}

// parseISOTimestamp reads the one form nearly every record carries,
// YYYY-MM-DD HH:MM:SS[.f], 'T' or a space between, no zone (UTC, the
// session's zone, for timestamptz too), at most 6 fraction digits,
// hours below 24 and seconds below 60: what ParseTimestamp gives, in a
// tenth of its time (it was 8% of a pass-through view's CPU). Anything
// else (a zone, BC, a leap second, rounding) is left to the full parser.
func parseISOTimestamp(s string) (time.Time, bool) {
	if len(s) < 19 || len(s) > 26 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	digits := func(i, n int) (int, bool) {
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	y, ok1 := digits(0, 4)
	mo, ok2 := digits(5, 2)
	d, ok3 := digits(8, 2)
	h, ok4 := digits(11, 2)
	mi, ok5 := digits(14, 2)
	sec, ok6 := digits(17, 2)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || y < 1 || h > 23 || mi > 59 || sec > 59 || mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) {
		return time.Time{}, false
	}
	micros := 0
	if len(s) > 19 {
		if s[19] != '.' || len(s) == 20 {
			return time.Time{}, false
		}
		f, ok := digits(20, len(s)-20)
		if !ok {
			return time.Time{}, false
		}
		for n := len(s) - 20; n < 6; n++ {
			f *= 10
		}
		micros = f
	}
	return time.Date(y, time.Month(mo), d, h, mi, sec, micros*1000, time.UTC), true
}

// daysIn is the length of month m of year y (proleptic Gregorian, as
// PostgreSQL's calendar).
func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// intervalUnits maps interval_in's unit words to (months, micros) per 1.
var intervalUnits = map[string]struct {
	months int64
	days   int64
	micros int64
}{
	"millennium": {months: 12000}, "millennia": {months: 12000}, "millenniums": {months: 12000},
	"century": {months: 1200}, "centuries": {months: 1200},
	"decade": {months: 120}, "decades": {months: 120},
	"year": {months: 12}, "years": {months: 12}, "y": {months: 12}, "yr": {months: 12}, "yrs": {months: 12},
	"month": {months: 1}, "months": {months: 1}, "mon": {months: 1}, "mons": {months: 1},
	"week": {days: 7}, "weeks": {days: 7}, "w": {days: 7},
	"day": {days: 1}, "days": {days: 1}, "d": {days: 1},
	"hour": {micros: 3600 * microsPerSecond}, "hours": {micros: 3600 * microsPerSecond}, "h": {micros: 3600 * microsPerSecond}, "hr": {micros: 3600 * microsPerSecond}, "hrs": {micros: 3600 * microsPerSecond},
	"minute": {micros: 60 * microsPerSecond}, "minutes": {micros: 60 * microsPerSecond}, "min": {micros: 60 * microsPerSecond}, "mins": {micros: 60 * microsPerSecond}, "m": {micros: 60 * microsPerSecond},
	"second": {micros: microsPerSecond}, "seconds": {micros: microsPerSecond}, "sec": {micros: microsPerSecond}, "secs": {micros: microsPerSecond}, "s": {micros: microsPerSecond},
	"millisecond": {micros: 1000}, "milliseconds": {micros: 1000}, "ms": {micros: 1000}, "msec": {micros: 1000}, "msecs": {micros: 1000},
	"microsecond": {micros: 1}, "microseconds": {micros: 1}, "us": {micros: 1}, "usec": {micros: 1}, "usecs": {micros: 1},
}

// IntervalUnit is a unit word's length, for date_trunc and extract.
func IntervalUnit(word string) (months, days, micros int64, ok bool) {
	u, ok := intervalUnits[strings.ToLower(word)]
	return u.months, u.days, u.micros, ok
}

// ParseInterval is interval_in for PostgreSQL's own format: "1 year 2
// mons 3 days 04:05:06", "@ 1 hour ago", "1.5 days", "-1 day +02:00".
// Fractions of months spill into days (30 to the month) and fractions
// of days into time (24 hours), as PostgreSQL does.
func ParseInterval(text string) (IntervalValue, error) {
	bad := sqlerr.Errorf(sqlerr.InvalidDatetimeFormat, "invalid input syntax for type interval: %q", text)
	s := strings.ToLower(strings.TrimSpace(text))
	s = strings.TrimSpace(strings.TrimPrefix(s, "@"))
	ago := false
	if strings.HasSuffix(s, " ago") {
		ago, s = true, strings.TrimSpace(strings.TrimSuffix(s, " ago"))
	}
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return IntervalValue{}, bad
	}
	var months, days float64
	var micros float64
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if strings.Contains(f, ":") {
			neg := strings.HasPrefix(f, "-")
			c, err := parseClock(strings.TrimLeft(f, "+-"), false)
			if err != nil {
				// "hh:mm:ss" may exceed 24 hours in an interval.
				var ok bool
				if c.micros, ok = longClock(strings.TrimLeft(f, "+-")); !ok {
					return IntervalValue{}, bad
				}
			}
			if neg {
				micros -= float64(c.micros)
			} else {
				micros += float64(c.micros)
			}
			continue
		}
		num := f
		unit := ""
		// "1day" and "1 day" both read.
		j := 0
		for j < len(num) && (num[j] >= '0' && num[j] <= '9' || num[j] == '.' || num[j] == '-' || num[j] == '+') {
			j++
		}
		num, unit = f[:j], f[j:]
		if unit == "" {
			if i+1 < len(fields) {
				if _, ok := intervalUnits[fields[i+1]]; ok {
					unit = fields[i+1]
					i++
				}
			}
			if unit == "" {
				// A bare number is seconds.
				unit = "second"
			}
		}
		n, err := strconv.ParseFloat(num, 64)
		u, ok := intervalUnits[unit]
		if err != nil || !ok {
			return IntervalValue{}, bad
		}
		months += n * float64(u.months)
		days += n * float64(u.days)
		micros += n * float64(u.micros)
	}
	// Spill fractions down: a month is 30 days, a day 24 hours.
	wholeMonths := math.Trunc(months)
	days += (months - wholeMonths) * daysPerMonth
	wholeDays := math.Trunc(days)
	micros += (days - wholeDays) * microsPerDay
	if math.Abs(wholeMonths) > math.MaxInt32 || math.Abs(wholeDays) > math.MaxInt32 || math.Abs(micros) > math.MaxInt64/2 {
		return IntervalValue{}, sqlerr.Errorf(sqlerr.DatetimeFieldOverflow, "interval field value out of range: %q", text)
	}
	iv := IntervalValue{Months: int32(wholeMonths), Days: int32(wholeDays), Micros: int64(math.Round(micros))}
	if ago {
		iv = IntervalValue{-iv.Months, -iv.Days, -iv.Micros}
	}
	return iv, nil
}

// longClock reads h+:mm[:ss[.f]] with any number of hours.
func longClock(s string) (int64, bool) {
	h, rest, ok := strings.Cut(s, ":")
	hours, err := strconv.ParseInt(h, 10, 64)
	if !ok || err != nil || hours > 2562047788 {
		return 0, false
	}
	c, err := parseClock("00:"+rest, false)
	if err != nil {
		return 0, false
	}
	return hours*3600*microsPerSecond + c.micros, true
}
