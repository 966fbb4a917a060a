// Package jsonx holds the JSON helpers the adapters share: decoding one
// document with its numbers kept as written, comparing two documents as
// values, and the token readers of the hand decoders.
package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
)

// errTrailing is the error of a document with more after its value.
var errTrailing = errors.New("trailing data after JSON value")

// Decode decodes b, which must hold exactly one JSON value, into maps,
// slices, strings, booleans, nil and json.Number: a number keeps its text,
// so none loses precision on a round trip (a float64 would).
func Decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errTrailing
	}
	return v, nil
}

// Equal reports whether a and b hold equal JSON values: member order and
// white space aside, numbers compared by their text. When either is not
// one JSON value, they are equal only when their bytes are.
func Equal(a, b []byte) bool {
	va, erra := Decode(a)
	vb, errb := Decode(b)
	if erra != nil || errb != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}
