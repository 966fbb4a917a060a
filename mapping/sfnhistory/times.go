package sfnhistory

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"time"
)

var null = []byte("null")

// EpochSeconds is a Step Functions API timestamp: epoch seconds with a
// fraction (1718791241.502, or in exponent form), or null.
type EpochSeconds struct{ time.Time }

// UnmarshalJSON implements json.Unmarshaler. Plain decimals are parsed
// exactly; exponent forms go through a float and are rounded to the
// microsecond.
func (t *EpochSeconds) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, null) {
		t.Time = time.Time{}
		return nil
	}
	if v, ok := parseDecimalSeconds(b); ok {
		t.Time = v
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsInf(f, 0) || math.Abs(f) > 1e12 {
		return fmt.Errorf("parse epoch seconds %.40q", b)
	}
	t.Time = time.UnixMicro(int64(math.Round(f * 1e6))).UTC()
	return nil
}

// parseDecimalSeconds parses "123" or "123.456" without rounding errors.
func parseDecimalSeconds(b []byte) (time.Time, bool) {
	intPart, frac, _ := bytes.Cut(b, []byte("."))
	if len(intPart) == 0 || len(intPart) > 12 || len(frac) > 9 {
		return time.Time{}, false
	}
	sec, err := strconv.ParseInt(string(intPart), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	var ns int64
	for i := range 9 {
		d := byte('0')
		if i < len(frac) {
			d = frac[i]
		}
		if d < '0' || d > '9' {
			return time.Time{}, false
		}
		ns = ns*10 + int64(d-'0')
	}
	return time.Unix(sec, ns).UTC(), true
}

// MarshalJSON implements json.Marshaler: epoch seconds with the fraction
// Step Functions writes, or null.
func (t EpochSeconds) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return null, nil
	}
	b := strconv.AppendInt(nil, t.Unix(), 10)
	if ns := t.Nanosecond(); ns != 0 {
		frac := strconv.AppendInt(nil, int64(ns)+1e9, 10)[1:]
		b = append(append(b, '.'), bytes.TrimRight(frac, "0")...)
	}
	return b, nil
}
