package replay_test

import (
	"context"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/testkit/bustest"
)

// seqs returns the sequences an events read yields.
func seqs(tb testing.TB, r *replay.Reader, tenant string, rg replay.Range) []uint64 {
	tb.Helper()
	var out []uint64
	for m, err := range r.Events(context.Background(), tenant, rg) {
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, m.Seq)
	}
	return out
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func tenantEvent(tenant string, rev int) substate.EventData {
	d := substate.EventData{TenantID: tenant, Provider: substate.ProviderEngine, ExecutionID: "e", SubState: substate.StateRunning,
		OccurredAt: t0, ExecutionStartedAt: t0, Revision: substate.Revision(rev)}
	d.Normalize()
	return d
}

func TestReaderRanges(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	r := newReader(b)
	if got := seqs(t, r, "", replay.Range{}); len(got) != 0 {
		t.Fatalf("empty stream yields %v", got)
	}
	publish(t, b, tenantEvent("a", 1), tenantEvent("b.with dots", 1), tenantEvent("a", 2))
	time.Sleep(20 * time.Millisecond)
	mid := time.Now()
	publish(t, b, tenantEvent("b.with dots", 2), tenantEvent("a", 3))

	for _, tc := range []struct {
		name   string
		tenant string
		rg     replay.Range
		want   []uint64
	}{
		{"All", "", replay.Range{}, []uint64{1, 2, 3, 4, 5}},
		{"Tenant", "a", replay.Range{}, []uint64{1, 3, 5}},
		{"EncodedTenant", "b.with dots", replay.Range{}, []uint64{2, 4}},
		{"UnknownTenant", "nobody", replay.Range{}, nil},
		{"FromSeq", "a", replay.Range{FromSeq: 2}, []uint64{3, 5}},
		{"ToSeq", "a", replay.Range{ToSeq: 4}, []uint64{1, 3}},
		{"Since", "", replay.Range{Since: mid}, []uint64{4, 5}},
		{"Until", "a", replay.Range{Until: mid}, []uint64{1, 3}},
		{"PastTheEnd", "", replay.Range{FromSeq: 9}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := seqs(t, r, tc.tenant, tc.rg); !equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReaderStopsWhenAsked(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	for i := range 20 {
		publish(t, b, tenantEvent("a", i+1))
	}
	n := 0
	for _, err := range newReader(b).Events(context.Background(), "", replay.Range{}) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 3 {
			break
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, err := range newReader(b).Events(ctx, "", replay.Range{}) {
		if err == nil {
			t.Fatal("a cancelled read yielded no error")
		}
	}
}

func TestReaderGet(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	publish(t, b, tenantEvent("a", 1))
	r := newReader(b)
	m, err := r.Get(context.Background(), substate.StreamEvents, 1)
	if err != nil || m.Subject != substate.EventsSubject("a") {
		t.Fatalf("get 1: %+v %v", m, err)
	}
	if _, err := r.Get(context.Background(), substate.StreamEvents, 2); substate.ErrorCode(err) != substate.ENOTFOUND {
		t.Fatalf("get 2: %v, want not found", err)
	}
}

// Reads hold no consumer on the server: thousands of them, whole, stopped
// early or cancelled, leave the stream without one.
func TestReaderHoldsNoConsumer(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	for i := range 5 {
		publish(t, b, tenantEvent("a", i+1), tenantEvent("b", i+1))
	}
	r := newReader(b)
	for i := range 2000 {
		ctx, cancel := context.WithCancel(context.Background())
		for _, err := range r.Events(ctx, "a", replay.Range{}) {
			if err != nil && ctx.Err() == nil {
				t.Fatalf("read %d: %v", i, err)
			}
			if i%2 == 1 {
				cancel() // a client gone in the middle of the read
			}
			if i%3 == 1 {
				break
			}
		}
		cancel()
	}
	if got := seqs(t, r, "a", replay.Range{}); !equal(got, []uint64{1, 3, 5, 7, 9}) {
		t.Fatalf("after 2000 reads: %v", got)
	}
	if n := bustest.Consumers(t, b.JetStream, substate.StreamEvents); n != 0 {
		t.Fatalf("%d consumers on %s after the reads, want 0", n, substate.StreamEvents)
	}
}

// A read longer than a batch, of messages larger than a batch's byte
// bound, yields every sequence once and in order, with the headers the
// messages were stored with and none the server adds to its answers.
func TestReaderBatches(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	big := make([]byte, 300<<10)
	var want []uint64
	for i := range 600 {
		data := []byte("{}")
		if i%50 == 0 {
			data = big
		}
		want = append(want, publishMsg(t, b.JetStream, substate.EventsSubject("a"), data, map[string]string{"X-Mark": "m"}))
		if i%7 == 0 {
			publishMsg(t, b.JetStream, substate.EventsSubject("b"), data, nil)
		}
	}
	r := newReader(b)
	var got []uint64
	for m, err := range r.Messages(context.Background(), substate.StreamEvents, substate.EventsSubject("a"), replay.Range{}) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get("X-Mark") != "m" || m.Header.Get("Nats-Sequence") != "" || m.Header.Get("Nats-Num-Pending") != "" {
			t.Fatalf("seq %d: headers %v", m.Seq, m.Header)
		}
		got = append(got, m.Seq)
	}
	if !equal(got, want) {
		t.Fatalf("read %d sequences (%v…), want %d", len(got), got[:min(5, len(got))], len(want))
	}
	mid := want[300]
	if got := seqs(t, r, "", replay.Range{FromSeq: mid, ToSeq: mid + 300}); len(got) != 301 || got[0] != mid {
		t.Fatalf("from %d to %d: %d sequences from %v", mid, mid+300, len(got), got[:min(1, len(got))])
	}
}
