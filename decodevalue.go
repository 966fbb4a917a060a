package substate

import (
	"strconv"
	"time"

	"github.com/substatehq/substate/internal/intern"
	"github.com/substatehq/substate/internal/jsonx"
)

// The readers of decodeEvent's values, each as json.Unmarshal reads its
// Go type: a JSON null leaves the zero value, another kind is an error.

// unique reads a string for field f that few other events share: its
// text joins the event's one string.
func (x *eventDecoder) unique(f textField) error {
	t, _, err := jsonx.ReadText(x.d)
	if err != nil {
		return err
	}
	x.pend(f, t)
	return nil
}

// pend makes t field f's value once the event has been read: it joins
// the event's one string. A field is pending at most once (the decoder
// refuses a name given twice), so the pending array has room for all.
func (x *eventDecoder) pend(f textField, t []byte) {
	if len(t) == 0 {
		return // the empty string, as the field already is
	}
	start := len(x.text)
	x.text = append(x.text, t...)
	x.pending[x.n] = pendingText{field: f, start: start, end: len(x.text)}
	x.n++
}

// known reads a string for field f, which is one of known as a rule: that
// one is the field's value, any other a unique text.
func (x *eventDecoder) known(f textField, e *Event, known []string) error {
	t, _, err := jsonx.ReadText(x.d)
	if err != nil {
		return err
	}
	if k, ok := knownText(t, known); ok {
		*textOf(e, f) = k
		return nil
	}
	x.pend(f, t)
	return nil
}

// knownText is the one of known that t spells.
func knownText(t []byte, known []string) (string, bool) {
	for _, k := range known {
		if string(t) == k {
			return k, true
		}
	}
	return "", false
}

// shared reads a string whose few values many events repeat, from the
// shared cache.
func (x *eventDecoder) shared() (string, error) {
	t, _, err := jsonx.ReadText(x.d)
	return intern.Bytes(t), err
}

// subState reads a sub-state as its UnmarshalText does, without a copy
// for one written as the contract spells it.
func (x *eventDecoder) subState(s *SubState) error {
	t, null, err := jsonx.ReadText(x.d)
	if err != nil || null {
		return err
	}
	if k, ok := knownText(t, knownSubStates); ok {
		*s = SubState(k)
		return nil
	}
	return s.UnmarshalText(t)
}

// readBool reads a JSON boolean.
func (x *eventDecoder) readBool() (bool, error) {
	v, err := x.d.ReadValue()
	switch {
	case err != nil:
		return false, err
	case v.Kind() == 't':
		return true, nil
	case v.Kind() == 'f', v.Kind() == 'n':
		return false, nil
	}
	return false, errWantBool
}

// readInt reads a JSON number that is an integer in an int. JSON's
// grammar (which the decoder holds the text to) has no sign but a minus
// and no base prefix, so strconv reads what json.Unmarshal would.
func (x *eventDecoder) readInt() (int, error) {
	v, null, err := jsonx.ReadNumber(x.d)
	if err != nil || null {
		return 0, err
	}
	n, err := strconv.ParseInt(string(v), 10, strconv.IntSize)
	return int(n), err
}

// readUint reads a JSON number that is an unsigned integer.
func (x *eventDecoder) readUint() (uint64, error) {
	v, null, err := jsonx.ReadNumber(x.d)
	if err != nil || null {
		return 0, err
	}
	return strconv.ParseUint(string(v), 10, 64)
}

// readTime reads an RFC 3339 time as json.Unmarshal reads a time.Time: the
// time package's strict parse, and the checks of the grammar it leaves to
// its caller (a two-digit hour, a period before the fraction, an offset
// in range).
func (x *eventDecoder) readTime() (time.Time, error) {
	b, null, err := jsonx.ReadText(x.d)
	if err != nil || null {
		return time.Time{}, err
	}
	var t time.Time
	if err := t.UnmarshalText(b); err != nil {
		return time.Time{}, err
	}
	switch {
	case b[len("2006-01-02T")+1] == ':':
		return time.Time{}, errTimeGrammar
	case b[len("2006-01-02T15:04:05")] == ',':
		return time.Time{}, errTimeGrammar
	case b[len(b)-1] != 'Z' && (dec2(b[len(b)-len("07:00"):]) >= 24 || dec2(b[len(b)-len("00"):]) >= 60):
		return time.Time{}, errTimeGrammar
	}
	return t, nil
}

// dec2 is the two-digit number b begins with.
func dec2(b []byte) int { return int(b[0]-'0')*10 + int(b[1]-'0') }

// timestamp reads the envelope's time as Timestamp.UnmarshalJSONFrom
// does (time.Parse with RFC3339Nano), without its copy of the text for a
// time the time package's strict parse takes, which time.Parse reads the
// same.
func (x *eventDecoder) timestamp() (Timestamp, error) {
	b, null, err := jsonx.ReadText(x.d)
	switch {
	case err != nil:
		return Timestamp{}, err
	case null:
		return Timestamp{}, jsonx.ErrWantString // as Timestamp.UnmarshalJSONFrom refuses it
	}
	var t time.Time
	if t.UnmarshalText(b) == nil {
		return Timestamp{t}, nil
	}
	t, err = time.Parse(time.RFC3339Nano, string(b))
	return Timestamp{t}, err
}
