package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
)

// Logs written to a file are slog's key=value text, or JSON lines with
// --log-format json; tint's colored text is for terminals only.
func TestLoggerToFile(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{"text", `level=INFO msg="workflow sub-state changed" tenant=acme`},
		{"json", `"level":"INFO","msg":"workflow sub-state changed","tenant":"acme"`},
	} {
		t.Run(tc.format, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			LogFlags{LogFormat: tc.format}.loggerTo(f).Info("workflow sub-state changed", "tenant", "acme")
			f.Close()
			got, _ := os.ReadFile(path)
			if !strings.Contains(string(got), tc.want) || strings.Contains(string(got), "\x1b[") {
				t.Fatalf("log line %q, want one with %q and no color codes", got, tc.want)
			}
			if tc.format == "json" && !json.Valid(got) {
				t.Fatalf("not JSON: %s", got)
			}
		})
	}
}

// A worker started with StreamFlags.args gets every stream setting, so a
// child worker never updates the streams to its own defaults (the bench's
// once put the 10m duplicate window back over --dedupe-window). A stream
// setting added without its flag in args fails here.
func TestStreamFlagsArgs(t *testing.T) {
	want := StreamFlags{RawMaxAge: time.Hour, RawMaxBytes: 1 << 20, EventsMaxAge: 2 * time.Hour, EventsMaxBytes: 2 << 20,
		DLQMaxAge: 3 * time.Hour, ChangesMaxAge: 4 * time.Hour, ChangesMaxBytes: 4 << 20, DedupeWindow: 90 * time.Second}
	v := reflect.ValueOf(want)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("give %s a value that is not a default in this test", v.Type().Field(i).Name)
		}
	}
	var got struct {
		StreamFlags `embed:""`
	}
	parser, err := kong.New(&got)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parser.Parse(want.args()); err != nil {
		t.Fatal(err)
	}
	if got.StreamFlags != want {
		t.Errorf("parsed %+v\nwant   %+v", got.StreamFlags, want)
	}
}
