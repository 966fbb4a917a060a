package worker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
)

// Logs written to a file are slog's key=value text, or JSON lines with
// --log-format json; tint's colored text is for terminals only.
func TestLoggerToFile(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{"text", `level=INFO msg="view changed" tenant=acme`},
		{"json", `"level":"INFO","msg":"view changed","tenant":"acme"`},
	} {
		t.Run(tc.format, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			LogFlags{LogFormat: tc.format}.LoggerTo(f).Info("view changed", "tenant", "acme")
			f.Close()
			got, _ := os.ReadFile(path)
			if !strings.Contains(string(got), tc.want) || strings.Contains(string(got), "\x1b[") {
				t.Fatalf("log line %q, want one with %q and no color codes", got, tc.want)
			}
			if tc.format == "json" && !json.Valid(got) {
				t.Fatalf("not JSON: %s", got)
			}
			if ms := regexp.MustCompile(`time.{1,3}\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`); !ms.Match(got) {
				t.Errorf("log line %q: want the time in UTC to the millisecond", got)
			}
		})
	}
}

// parseFlags parses args as "substate run" does (without its environment
// variables) into Flags.
func parseFlags(t *testing.T, args ...string) Flags {
	t.Helper()
	var cli struct {
		Flags `embed:""`
	}
	parser, err := kong.New(&cli, kong.Exit(func(int) { t.Fatal("exit during a parse") }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parser.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cli.Flags
}

// DefaultFlags is what an empty command line gives: a default added to,
// or changed in, a flag's tag and not in DefaultFlags (or the other way
// round) fails here.
func TestDefaultFlags(t *testing.T) {
	got, want := DefaultFlags(), parseFlags(t)
	for _, d := range fieldDiffs(reflect.ValueOf(got), reflect.ValueOf(want)) {
		t.Errorf("DefaultFlags().%s, the flag's default is %s", d[0], d[1])
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultFlags() = %+v\nwant %+v", got, want)
	}
	if reflect.DeepEqual(got, Flags{}) {
		t.Fatal("the flags declare no default")
	}
}

// fieldDiffs lists the fields of two structs of one type that differ, as
// pairs of "Name = got" and the wanted value, embedded structs by their
// own fields.
func fieldDiffs(got, want reflect.Value) [][2]string {
	var out [][2]string
	for i := range got.NumField() {
		f := got.Type().Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, fieldDiffs(got.Field(i), want.Field(i))...)
			continue
		}
		if g, w := got.Field(i).Interface(), want.Field(i).Interface(); !reflect.DeepEqual(g, w) {
			out = append(out, [2]string{fmt.Sprintf("%s = %#v", f.Name, g), fmt.Sprintf("%#v", w)})
		}
	}
	return out
}

// A worker started with StreamFlags.Args gets every stream setting, so a
// child worker never updates the streams to its own defaults (the bench's
// once put the 10m duplicate window back over --dedupe-window). A stream
// setting added without its flag in Args fails here.
func TestStreamFlagsArgs(t *testing.T) {
	want := StreamFlags{RawMaxAge: time.Hour, RawMaxBytes: 1 << 20, EventsMaxAge: 2 * time.Hour, EventsMaxBytes: 2 << 20,
		DLQMaxAge: 3 * time.Hour, ChangesMaxAge: 4 * time.Hour, ChangesMaxBytes: 4 << 20, DedupeWindow: 90 * time.Second, StreamCompression: "none"}
	v := reflect.ValueOf(want)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("give %s a value that is not a default in this test", v.Type().Field(i).Name)
		}
	}
	if got := parseFlags(t, want.Args()...).StreamFlags; got != want {
		t.Errorf("parsed %+v\nwant   %+v", got, want)
	}
}

// A batch size below one, a batch linger of nothing, below nothing or
// above a second, and a longest linger below the linger or above a second
// are refused before anything opens.
func TestCheckBatches(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		size         int
		linger, most time.Duration
		ok           bool
	}{
		{512, 2 * ms, 20 * ms, true},
		{1, time.Second, time.Second, true},
		{512, 5 * ms, 5 * ms, true},
		{0, 2 * ms, 20 * ms, false},
		{512, 0, 20 * ms, false},
		{512, -ms, 20 * ms, false},
		{512, time.Second + 1, time.Second + 1, false},
		{512, 5 * ms, 4 * ms, false},
		{512, 2 * ms, time.Second + 1, false},
	} {
		f := DefaultFlags()
		f.BatchSize, f.BatchLinger, f.BatchLingerMax = tc.size, tc.linger, tc.most
		if err := f.CheckBatches(); (err == nil) != tc.ok {
			t.Errorf("--batch-size %d --batch-linger %s --batch-linger-max %s: %v, want ok %v", tc.size, tc.linger, tc.most, err, tc.ok)
		}
	}
}
