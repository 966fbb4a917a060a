package main

import (
	"reflect"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/substatehq/substate/worker"
)

// A worker started with StreamFlags.Args gets every stream setting, so a
// child worker never updates the streams to its own defaults (the bench's
// once put the 10m duplicate window back over --dedupe-window). A stream
// setting added without its flag in Args fails here.
func TestStreamFlagsArgs(t *testing.T) {
	want := worker.StreamFlags{RawMaxAge: time.Hour, RawMaxBytes: 1 << 20, EventsMaxAge: 2 * time.Hour, EventsMaxBytes: 2 << 20,
		DLQMaxAge: 3 * time.Hour, ChangesMaxAge: 4 * time.Hour, ChangesMaxBytes: 4 << 20, DedupeWindow: 90 * time.Second}
	v := reflect.ValueOf(want)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("give %s a value that is not a default in this test", v.Type().Field(i).Name)
		}
	}
	var got struct {
		worker.StreamFlags `embed:""`
	}
	parser, err := kong.New(&got)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parser.Parse(want.Args()); err != nil {
		t.Fatal(err)
	}
	if got.StreamFlags != want {
		t.Errorf("parsed %+v\nwant   %+v", got.StreamFlags, want)
	}
}
