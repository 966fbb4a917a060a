package replay_test

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/internal/cputime"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/testkit/bustest"
)

// scanStream fills SUBSTATE_EVENTS for the scan tests: 1,500 messages on
// two subjects with a header each, some of them larger than a pull's byte
// bound, a run of deleted ones in the middle and the last three deleted.
// It returns the stream's last sequence and a time between its halves.
func scanStream(t *testing.T, b *bus.Bus) (last uint64, mid time.Time) {
	t.Helper()
	big := bytes.Repeat([]byte("x"), 300<<10)
	for i := range 1500 {
		data, subject := []byte(fmt.Sprintf(`{"n":%d}`, i)), substate.EventsSubject("a")
		if i%40 == 0 {
			data = big
		}
		if i%3 == 0 {
			subject = substate.EventsSubject("b")
		}
		if i == 750 {
			time.Sleep(20 * time.Millisecond)
			mid = time.Now()
		}
		last = publishMsg(t, b.JetStream, subject, data, map[string]string{"X-Mark": fmt.Sprint(i)})
	}
	s, err := b.JetStream.Stream(context.Background(), substate.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{300, 301, 302, 303, last - 2, last - 1, last} {
		if err := s.DeleteMsg(context.Background(), seq); err != nil {
			t.Fatal(err)
		}
	}
	return last, mid
}

// read collects what a read yields, failing on an error.
func read(t *testing.T, msgs func(yield func(replay.Message, error) bool)) []replay.Message {
	t.Helper()
	var out []replay.Message
	for m, err := range msgs {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// A scan yields what a read with direct gets yields, message for message,
// for every kind of range: the same sequences, subjects, times, headers
// (none the server adds) and bodies, past deleted messages, pulls ended
// by their byte bound, and ranges that hold nothing.
func TestScanReadsAsMessagesDo(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	last, mid := scanStream(t, b)
	r := newReader(b)
	for _, tc := range []struct {
		name    string
		subject string
		rg      replay.Range
	}{
		{"All", "", replay.Range{}},
		{"Subject", substate.EventsSubject("a"), replay.Range{}},
		{"FromTo", "", replay.Range{FromSeq: 290, ToSeq: 1200}},
		{"EndsOnDeleted", "", replay.Range{FromSeq: 200, ToSeq: 302}},
		{"OnlyDeleted", "", replay.Range{FromSeq: 300, ToSeq: 303}},
		{"DeletedAtTheEnd", "", replay.Range{FromSeq: last - 2}},
		{"Since", "", replay.Range{Since: mid}},
		{"Until", "", replay.Range{FromSeq: 100, Until: mid}},
		{"PastTheEnd", "", replay.Range{FromSeq: last + 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := read(t, r.Messages(context.Background(), substate.StreamEvents, tc.subject, tc.rg))
			got := read(t, r.Scan(context.Background(), substate.StreamEvents, tc.subject, tc.rg))
			if len(got) != len(want) {
				t.Fatalf("scan yields %d messages, direct gets %d", len(got), len(want))
			}
			for i := range want {
				g, w := got[i], want[i]
				if g.Seq != w.Seq || g.Subject != w.Subject || !g.Stored.Equal(w.Stored) || !bytes.Equal(g.Data, w.Data) {
					t.Fatalf("message %d: scan seq %d %s %s (%d bytes), direct gets seq %d %s %s (%d bytes)",
						i, g.Seq, g.Subject, g.Stored, len(g.Data), w.Seq, w.Subject, w.Stored, len(w.Data))
				}
				if fmt.Sprint(g.Header) != fmt.Sprint(w.Header) {
					t.Fatalf("seq %d: scan headers %v, direct gets %v", g.Seq, g.Header, w.Header)
				}
			}
		})
	}
}

// A scan deletes its consumer however it ends: read whole, left early, or
// with its context cancelled in the middle; and so does a check, whose
// scans read both streams.
func TestScanLeavesNoConsumer(t *testing.T) {
	b := newBus(t, bus.DefaultTopology())
	publishRaw(t, b, 600)
	r := newReader(b)
	for i := range 30 {
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		for _, err := range r.Scan(ctx, substate.StreamRaw, "", replay.Range{}) {
			if err != nil && ctx.Err() == nil {
				t.Fatalf("scan %d: %v", i, err)
			}
			n++
			if i%3 == 1 && n == 10 {
				cancel() // a caller gone in the middle of the read
			}
			if i%3 == 2 && n == 10 {
				break
			}
		}
		cancel()
	}
	if res := check(t, newChecker(t, b, prometheus.NewRegistry())); res.Counts[replay.CheckVerified] != 600 {
		t.Fatalf("check counts %v, want 600 verified", res.Counts)
	}
	for _, stream := range []string{substate.StreamRaw, substate.StreamEvents} {
		if n := bustest.Consumers(t, b.JetStream, stream); n != 0 {
			t.Fatalf("%d consumers on %s after the scans, want 0", n, stream)
		}
	}
}

// BenchmarkScan compares the CPU per message, the embedded server's
// included, of reading a stream with direct gets and with a scan.
func BenchmarkScan(b *testing.B) {
	const n = 5000
	bs := newBus(b, bus.DefaultTopology())
	publishRaw(b, bs, n)
	r := newReader(bs)
	for _, stream := range []string{substate.StreamRaw, substate.StreamEvents} {
		for _, read := range []struct {
			name string
			msgs func(ctx context.Context, stream, subject string, rg replay.Range) iter.Seq2[replay.Message, error]
		}{{"direct", r.Messages}, {"scan", r.Scan}} {
			b.Run(read.name+"/"+stream, func(b *testing.B) {
				msgs, cpu := 0, cputime.Process()
				for b.Loop() {
					for _, err := range read.msgs(context.Background(), stream, "", replay.Range{}) {
						if err != nil {
							b.Fatal(err)
						}
						msgs++
					}
				}
				if msgs != n*b.N {
					b.Fatalf("read %d messages, want %d", msgs, n*b.N)
				}
				b.ReportMetric(float64((cputime.Process()-cpu).Nanoseconds())/float64(msgs), "cpu-ns/msg")
			})
		}
	}
}
