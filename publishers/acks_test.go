package publishers

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/bustest"
)

func TestParsePubAck(t *testing.T) {
	for _, c := range []struct {
		name, data string
		header     nats.Header
		seq        uint64
		dup        bool
		code       string // of the error, "" for none
	}{
		// As the server writes them (stream.go: the pubAck template and
		// its duplicate suffix, with the space).
		{name: "stored", data: `{"stream":"SUBSTATE_EVENTS","seq":42}`, seq: 42},
		{name: "with domain", data: `{"stream":"S","domain":"hub","seq":7}`, seq: 7},
		{name: "duplicate", data: `{"stream":"S","seq":9,"duplicate": true}`, seq: 9, dup: true},
		{name: "duplicate without space", data: `{"stream":"S","seq":9,"duplicate":true}`, seq: 9, dup: true},
		{name: "large seq", data: `{"stream":"S","seq":18446744073709551615}`, seq: 18446744073709551615},
		{name: "error", data: `{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"},"stream":"S","seq":0}`, code: substate.EUNAVAILABLE},
		{name: "no responders", header: nats.Header{statusHeader: {"503"}}, code: substate.EUNAVAILABLE},
		{name: "no seq", data: `{"stream":"S"}`, code: substate.EUNAVAILABLE},
		{name: "zero seq", data: `{"stream":"S","seq":0}`, code: substate.EUNAVAILABLE},
		{name: "overflow", data: `{"stream":"S","seq":99999999999999999999}`, code: substate.EUNAVAILABLE},
		{name: "not json", data: `garbage`, code: substate.EUNAVAILABLE},
		{name: "broken error", data: `{"error":`, code: substate.EUNAVAILABLE},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := parsePubAck(&nats.Msg{Data: []byte(c.data), Header: c.header})
			if c.code != "" {
				if substate.ErrorCode(r.Err) != c.code {
					t.Fatalf("got %+v, want a %s error", r, c.code)
				}
				return
			}
			if r.Err != nil || r.Seq != c.seq || r.Duplicate != c.dup {
				t.Fatalf("got %+v, want seq %d duplicate %v", r, c.seq, c.dup)
			}
		})
	}
}

func TestParsePubAckSaysWhatTheServerRefused(t *testing.T) {
	r := parsePubAck(&nats.Msg{Data: []byte(`{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}`)})
	if r.Err == nil || !strings.Contains(r.Err.Error(), "maximum messages exceeded") || !strings.Contains(r.Err.Error(), "10077") {
		t.Fatalf("error %v does not carry the server's", r.Err)
	}
}

func TestReplyIndex(t *testing.T) {
	for _, c := range []struct {
		tail  string
		round uint64
		index int
		ok    bool
	}{
		{"1.0", 1, 0, true},
		{"18446744073709551615.1023", 18446744073709551615, 1023, true},
		{"1", 0, 0, false},
		{"x.1", 0, 0, false},
		{"1.x", 0, 0, false},
		{"1.-1", 0, 0, false},
		{"", 0, 0, false},
	} {
		round, index, ok := replyIndex(c.tail)
		if ok != c.ok || ok && (round != c.round || index != c.index) {
			t.Errorf("replyIndex(%q) = %d, %d, %v", c.tail, round, index, ok)
		}
	}
}

// A round's reply subjects are <prefix><round>.<index>, cut from one
// string across the lengths of the indexes, and read back by replyIndex.
func TestRoundReplies(t *testing.T) {
	const prefix = "_INBOX.abc."
	for _, n := range []int{0, 1, 9, 10, 11, 99, 100, 101, 1000, 1234} {
		for _, id := range []uint64{1, 42, 18446744073709551615} {
			r := ackRound{id: id}
			r.replies, r.base = roundReplies(prefix, id, n)
			end := 0
			for i := range n {
				got, want := r.replyOf(i), prefix+strconv.FormatUint(id, 10)+"."+strconv.Itoa(i)
				if got != want {
					t.Fatalf("round %d of %d: reply %d is %q, want %q", id, n, i, got, want)
				}
				if round, index, ok := replyIndex(got[len(prefix):]); !ok || round != id || index != i {
					t.Fatalf("replyIndex(%q) = %d, %d, %v", got, round, index, ok)
				}
				end += len(want)
			}
			if len(r.replies) != end {
				t.Fatalf("round of %d: %d bytes of replies, want %d", n, len(r.replies), end)
			}
		}
	}
	if n := testing.AllocsPerRun(10, func() { roundReplies(prefix, 7, 512) }); n > 1 {
		t.Errorf("the replies of a round of 512: %v allocations, want 1", n)
	}
}

func FuzzParsePubAck(f *testing.F) {
	f.Add([]byte(`{"stream":"S","seq":9,"duplicate": true}`))
	f.Add([]byte(`{"error":{"code":400}}`))
	f.Fuzz(func(t *testing.T, d []byte) {
		r := parsePubAck(&nats.Msg{Data: d})
		if r.Err == nil && r.Seq == 0 {
			t.Fatalf("%q: no error and no sequence", d)
		}
		replyIndex(string(d))
	})
}

// TestAcksAgainstTheServer publishes rounds to the real server and reads
// each answer it gives: stored, duplicate, refused, no stream, none.
func TestAcksAgainstTheServer(t *testing.T) {
	b := bustest.Open(t)
	ctx := context.Background()
	if _, err := b.JetStream.CreateStream(ctx, jetstream.StreamConfig{
		Name: "ACKS", Subjects: []string{"substate.acks.>"}, Duplicates: time.Minute, MaxMsgSize: 64,
	}); err != nil {
		t.Fatal(err)
	}
	silent, err := b.Conn.Subscribe("substate.silent", func(*nats.Msg) {}) // takes the message, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Unsubscribe()
	a := newAcks(b.JetStream.Conn())
	msg := func(subject, id, data string) *nats.Msg {
		m := nats.NewMsg(subject)
		m.Data = []byte(data)
		if id != "" {
			m.Header.Set(substate.HeaderMsgID, id)
		}
		return m
	}
	send := func(timeout time.Duration, ms ...*nats.Msg) []pubResult {
		t.Helper()
		r, err := a.round(len(ms))
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range ms {
			if err := a.publish(r, i, m); err != nil {
				t.Fatal(err)
			}
		}
		return a.wait(ctx, r, len(ms), timeout)
	}
	got := send(10*time.Second,
		msg("substate.acks.a", "one", "x"),
		msg("substate.acks.a", "two", "x"),
		msg("substate.acks.a", "one", "x"),
		msg("substate.acks.a", "big", strings.Repeat("x", 100)),
		msg("substate.nostream", "", "x"),
	)
	if r := got[0]; !r.answered || r.Err != nil || r.Seq != 1 || r.Duplicate {
		t.Errorf("first: %+v, want stored at 1", r)
	}
	if r := got[1]; !r.answered || r.Err != nil || r.Seq != 2 || r.Duplicate {
		t.Errorf("second: %+v, want stored at 2", r)
	}
	if r := got[2]; !r.answered || r.Err != nil || r.Seq != 1 || !r.Duplicate {
		t.Errorf("repeat: %+v, want the duplicate of 1", r)
	}
	if r := got[3]; !r.answered || r.Err == nil || !strings.Contains(r.Err.Error(), "maximum") {
		t.Errorf("too large: %+v, want the server's refusal", r)
	}
	if r := got[4]; !r.answered || r.Err != errNoStream {
		t.Errorf("no stream: %+v, want %v", r, errNoStream)
	}
	many := make([]*nats.Msg, 120) // indexes of one, two and three digits
	for i := range many {
		many[i] = msg("substate.acks.b", "many-"+strconv.Itoa(i), "x")
	}
	for i, r := range send(10*time.Second, many...) {
		if !r.answered || r.Err != nil || r.Seq != uint64(3+i) {
			t.Fatalf("message %d of a round of %d: %+v, want stored at %d", i, len(many), r, 3+i)
		}
	}
	late := send(200*time.Millisecond, msg("substate.acks.a", "three", "x"), msg("substate.silent", "", "x"))
	if r := late[0]; !r.answered || r.Seq != 3+uint64(len(many)) {
		t.Errorf("before the silent one: %+v, want stored at %d", r, 3+len(many))
	}
	if r := late[1]; r.answered {
		t.Errorf("silent: %+v, want no answer", r)
	}
	if n := len(a.rounds); n != 0 {
		t.Errorf("%d rounds still registered", n)
	}
}

// TestAcksWaitsOnlyForWhatWasSent: a round cut short by a failed send
// ends when the messages sent are answered, not at its timeout.
func TestAcksWaitsOnlyForWhatWasSent(t *testing.T) {
	b := bustest.Open(t)
	a := newAcks(b.JetStream.Conn())
	r, err := a.round(3)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(substate.EventsSubject("t"))
	m.Data = []byte("{}")
	if err := a.publish(r, 0, m); err != nil {
		t.Fatal(err)
	}
	got := a.wait(context.Background(), r, 1, time.Minute)
	if len(got) != 1 || !got[0].answered || got[0].Err != nil {
		t.Fatalf("got %+v", got)
	}
	select {
	case <-r.done: // ended by the answer it was owed
	default:
		t.Fatal("the round ended at its timeout: it waited for the unsent too")
	}
}

// TestAcksOnAClosedConnection: a round on a connection that is gone is
// an EUNAVAILABLE error, every time it is tried, and so is PublishEvents.
func TestAcksOnAClosedConnection(t *testing.T) {
	b := bustest.Open(t)
	nc := bustest.Connect(t, b, bus.Worker)
	nc.Close()
	a := newAcks(nc)
	for range 2 {
		if _, err := a.round(1); substate.ErrorCode(err) != substate.EUNAVAILABLE {
			t.Fatalf("round on a closed connection: %v, want EUNAVAILABLE", err)
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ev := substate.NewEvent("e1", substate.EventData{TenantID: "t", Provider: substate.ProviderEngine, ExecutionID: "x", SubState: substate.StateRunning})
	if err := NewJetStream(js).PublishEvents(context.Background(), []substate.Event{ev}); substate.ErrorCode(err) != substate.EUNAVAILABLE {
		t.Fatalf("PublishEvents on a closed connection: %v, want EUNAVAILABLE", err)
	}
}
