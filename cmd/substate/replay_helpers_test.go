package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/testkit/bustest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// newTestBus starts an embedded NATS server with substate's streams, for
// commands that only read the streams.
func newTestBus(tb testing.TB) *bus.Bus { tb.Helper(); return bustest.Open(tb) }

// golden compares got with testdata/name, or rewrites it with -update.
func golden(tb testing.TB, name, got string) {
	tb.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run the test with -update to create it)", err)
	}
	if got != string(want) {
		tb.Errorf("%s differs from the golden file; run with -update if the change is right\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// publishMsg puts any bytes on a subject of b's streams.
func publishMsg(tb testing.TB, b *bus.Bus, subject, data string) {
	tb.Helper()
	if _, err := b.JetStream.Publish(context.Background(), subject, []byte(data)); err != nil {
		tb.Fatal(err)
	}
}

func newTestReader(b *bus.Bus) *replay.Reader { return &replay.Reader{JS: b.JetStream} }
