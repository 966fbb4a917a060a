package console

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/jsonx"
)

// decodeChange reads one change-feed message, a CloudEvent around the
// change. It is the one place that knows the feed's payload. It reads
// only what a page needs apart from the new view, which it keeps as the
// feed encoded it: a change reaches the pages without being decoded and
// encoded again.
//
// It walks the message's tokens with a pooled decoder, skipping the rest
// (the old view is half of every message), and accepts and refuses what
// json.Unmarshal into the fields it reads would: names matched exactly, a
// null leaving a field unset, a name given twice read twice, anything
// that is not valid JSON, not of its field's kind or followed by more
// refused. The fuzz target holds it to that. By reflection the decode was
// about a third of what a followed change cost the console.
func decodeChange(data []byte) (liveChange, error) {
	d := feedDecoders.Get().(*jsontext.Decoder)
	d.Reset(bytes.NewBuffer(data), feedDecoding)
	ch, err := readChange(d)
	d.Reset(noInput, feedDecoding) // keep none of data in the pool
	feedDecoders.Put(d)
	if err != nil {
		return liveChange{}, substate.WrapError(substate.EINVALID, err, "decode change event")
	}
	if bytes.ContainsAny(ch.new, "\r\n") { // an SSE frame's data is one line
		v := jsontext.Value(ch.new)
		if err := v.Compact(); err != nil {
			return liveChange{}, substate.WrapError(substate.EINVALID, err, "decode change event")
		}
		ch.new = v
	}
	if ch.tenantID == "" && len(ch.new) > 0 { // a change of a feed older than its tenantId
		var v struct {
			TenantID string `json:"tenantId"`
		}
		_ = json.Unmarshal(ch.new, &v)
		ch.tenantID = v.TenantID
	}
	return ch, nil
}

var (
	feedDecoders = sync.Pool{New: func() any { return jsontext.NewDecoder(noInput, feedDecoding) }}
	noInput      = bytes.NewReader(nil)
)

// readChange reads the envelope: its specversion and source, which must be
// a change's, and its data; nothing may follow it.
func readChange(d *jsontext.Decoder) (liveChange, error) {
	var ch liveChange
	var spec, source string
	err := jsonx.ReadObject(d, func(name []byte) (err error) {
		switch string(name) {
		case "specversion":
			spec, err = readString(d, spec, substate.CloudEventsSpecVersion)
		case "source":
			source, err = readString(d, source, substate.ChangeSource)
		case "data":
			err = jsonx.ReadObject(d, func(name []byte) error { return readData(d, name, &ch) })
		default:
			err = d.SkipValue()
		}
		return err
	})
	if err != nil {
		return ch, err
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return ch, cmp.Or(err, errors.New("data after the change event"))
	}
	if spec != substate.CloudEventsSpecVersion || source != substate.ChangeSource {
		return ch, fmt.Errorf("not a substate change (specversion %q, source %q)", spec, source)
	}
	return ch, nil
}

// readData reads one member of the change's data.
func readData(d *jsontext.Decoder, name []byte, ch *liveChange) (err error) {
	switch string(name) {
	case "seq":
		ch.seq, err = readUint(d, ch.seq)
	case "tenantId":
		ch.tenantID, err = readString(d, ch.tenantID, "")
	case "old":
		err = jsonx.ReadObject(d, func(name []byte) error {
			if string(name) != "workflowSubState" {
				return d.SkipValue()
			}
			b, null, err := jsonx.ReadText(d)
			if err == nil && !null {
				err = ch.oldSubState.UnmarshalText(b)
			}
			return err
		})
	case "new":
		var v jsontext.Value
		if v, err = d.ReadValue(); err == nil {
			ch.new = bytes.Clone(v)
		}
	default:
		err = d.SkipValue()
	}
	return err
}

// readString reads a JSON string: old for null, known itself when the
// string is known (no copy), else a copy.
func readString(d *jsontext.Decoder, old, known string) (string, error) {
	b, null, err := jsonx.ReadText(d)
	switch {
	case err != nil || null:
		return old, err
	case known != "" && string(b) == known:
		return known, nil
	}
	return string(b), nil
}

// readUint reads a JSON number that is an unsigned integer; null leaves
// old.
func readUint(d *jsontext.Decoder, old uint64) (uint64, error) {
	v, null, err := jsonx.ReadNumber(d)
	if err != nil || null {
		return old, err
	}
	return strconv.ParseUint(string(v), 10, 64)
}
