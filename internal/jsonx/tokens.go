package jsonx

import (
	"bytes"
	"errors"

	"github.com/go-json-experiment/json/jsontext"
)

// Errors of the token readers: a value of another kind than asked.
var (
	ErrWantObject = errors.New("want a JSON object")
	ErrWantString = errors.New("want a JSON string")
	ErrWantNumber = errors.New("want a JSON number")
)

// The token readers below are for the hand decoders of the hot path (the
// canonical event, the console's change), which walk a jsontext.Decoder
// and read what json.Unmarshal into a struct would read.

// ReadObject reads a JSON object, calling member with each name (valid
// until the next read) to read its value; null is no object and no error.
func ReadObject(d *jsontext.Decoder, member func(name []byte) error) error {
	switch d.PeekKind() {
	case 'n':
		_, err := d.ReadToken()
		return err
	case '{':
	default:
		if _, err := d.ReadValue(); err != nil {
			return err
		}
		return ErrWantObject
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	for d.PeekKind() != '}' {
		v, err := d.ReadValue()
		if err != nil {
			return err
		}
		name, err := Unquote(v)
		if err != nil {
			return err
		}
		if err := member(name); err != nil {
			return err
		}
	}
	_, err := d.ReadToken()
	return err
}

// ReadText reads a JSON string's text (valid until the next read), or
// reports a null.
func ReadText(d *jsontext.Decoder) (text []byte, null bool, err error) {
	v, err := d.ReadValue()
	switch {
	case err != nil:
		return nil, false, err
	case v.Kind() == 'n':
		return nil, true, nil
	case v.Kind() != '"':
		return nil, false, ErrWantString
	}
	text, err = Unquote(v)
	return text, false, err
}

// ReadNumber reads a JSON number's text (valid until the next read), or
// reports a null.
func ReadNumber(d *jsontext.Decoder) (number []byte, null bool, err error) {
	v, err := d.ReadValue()
	switch {
	case err != nil:
		return nil, false, err
	case v.Kind() == 'n':
		return nil, true, nil
	case v.Kind() != '0':
		return nil, false, ErrWantNumber
	}
	return v, false, nil
}

// Unquote returns the text of the JSON string v: a part of v when it has
// no escapes, else a copy.
func Unquote(v jsontext.Value) ([]byte, error) {
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1], nil
	}
	return jsontext.AppendUnquote(nil, v)
}
