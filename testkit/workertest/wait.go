package workertest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/tools/soak"
)

// Eventually runs fn until it returns "" or ten seconds pass, then fails
// the test with fn's last answer.
func Eventually(tb testing.TB, fn func() string) {
	tb.Helper()
	EventuallyWithin(tb, 10*time.Second, fn)
}

// EventuallyWithin runs fn until it returns "" or limit passes, then
// fails the test with fn's last answer.
func EventuallyWithin(tb testing.TB, limit time.Duration, fn func() string) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for {
		msg := fn()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatal(msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitSettled waits until the normalizer and the projector of the worker
// whose NATS is at url (connected to with the nkey seed file) have nothing
// pending and nothing unacknowledged.
func WaitSettled(tb testing.TB, url, nkey string) {
	tb.Helper()
	b, err := bus.Open(bus.Config{URL: url, NkeyFile: nkey})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	Eventually(tb, func() string { return Busy(tb, b.JetStream) })
}

// Busy says what the normalizer or the projector still has to do; ""
// when nothing.
func Busy(tb testing.TB, js jetstream.JetStream) string {
	tb.Helper()
	s, err := soak.PipelineBusy(context.Background(), js)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
