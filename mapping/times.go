package mapping

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/substatehq/substate/mapping/sfnhistory"
)

var null = []byte("null")

// epochMillis is an EventBridge date: epoch milliseconds, or null.
type epochMillis struct{ time.Time }

// UnmarshalJSON implements json.Unmarshaler.
func (t *epochMillis) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, null) {
		t.Time = time.Time{}
		return nil
	}
	if ms, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		t.Time = time.UnixMilli(ms).UTC()
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsInf(f, 0) || math.Abs(f) > 1e15 {
		return fmt.Errorf("parse epoch milliseconds %.40q", b)
	}
	t.Time = time.UnixMilli(int64(math.Round(f))).UTC()
	return nil
}

// EpochSeconds is a Step Functions API timestamp: epoch seconds with a
// fraction, or null.
type EpochSeconds = sfnhistory.EpochSeconds

// restateTime is a Restate admin-API timestamp: RFC 3339 text (with or
// without a zone, UTC assumed), epoch milliseconds, or null.
type restateTime struct{ time.Time }

var restateLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"}

// UnmarshalJSON implements json.Unmarshaler.
func (t *restateTime) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, null) {
		t.Time = time.Time{}
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		var ms epochMillis
		if err := ms.UnmarshalJSON(b); err != nil {
			return err
		}
		t.Time = ms.Time
		return nil
	}
	s := string(b[1 : len(b)-1])
	for _, layout := range restateLayouts {
		if v, err := time.Parse(layout, s); err == nil {
			t.Time = v.UTC()
			return nil
		}
	}
	return fmt.Errorf("parse timestamp %.40q", s)
}

// firstSet returns the first non-zero time.
func firstSet(ts ...time.Time) time.Time {
	for _, t := range ts {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}
