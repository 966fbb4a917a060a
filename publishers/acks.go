package publishers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate"
)

// acks publishes rounds of messages on JetStream over the plain NATS
// connection and collects the server's acknowledgements on one wildcard
// subscription.
//
// nats.go's PublishMsgAsync does the same job with a future, two
// channels, a reply subject and a timer per message and decodes every
// acknowledgement with encoding/json; on the normalizer's and the change
// feed's publishes that was about 32 allocations an event
// (docs/performance.md). A round here registers once, and an
// acknowledgement's stream sequence and duplicate flag are read off its
// bytes; only an error answer is decoded as JSON. What a round reports is
// what the server answered for each message: stored (or a duplicate),
// refused with its error, or nothing yet when the round's wait ends.
type acks struct {
	nc *nats.Conn

	mu     sync.Mutex
	prefix string             // <inbox>. : a round's replies are <prefix><round>.<index>; set before sub
	sub    *nats.Subscription // nil until the first round subscribes
	next   uint64
	rounds map[uint64]*ackRound
}

// newAcks returns the acknowledgement collector of nc; it subscribes on
// first use.
func newAcks(nc *nats.Conn) *acks { return &acks{nc: nc} }

// start subscribes to the collector's inbox on first use. A subscription
// that fails (the connection closed) is not kept: the next round tries
// again.
func (a *acks) start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sub != nil {
		return nil
	}
	if a.nc == nil {
		return substate.Errorf(substate.EUNAVAILABLE, "publish: no nats connection")
	}
	a.prefix = a.nc.NewInbox() + "."
	a.rounds = map[uint64]*ackRound{}
	sub, err := a.nc.Subscribe(a.prefix+"*.*", a.receive)
	if err != nil {
		return err
	}
	// The round's size bounds what is in flight; the defaults' 512k
	// messages would only hide a stuck handler.
	if err := sub.SetPendingLimits(-1, 64<<20); err != nil {
		_ = sub.Unsubscribe()
		return err
	}
	a.sub = sub
	return nil
}

// ackRound is the acknowledgements of one round of n messages.
type ackRound struct {
	id      uint64
	base    int    // len(prefix + id + ".")
	replies string // the reply subjects of its messages, one after the other (see replyOf)

	mu      sync.Mutex
	results []pubResult
	left    int
	done    chan struct{}
}

// pubResult is the server's answer to one message of a round.
type pubResult struct {
	Seq       uint64 // the stream sequence that holds it (the first's, for a duplicate)
	Duplicate bool
	Err       error // refused: the server's error (EUNAVAILABLE)
	answered  bool
}

// round registers a round of n messages.
func (a *acks) round(n int) (*ackRound, error) {
	if err := a.start(); err != nil {
		return nil, unavailable(err, "publish")
	}
	a.mu.Lock()
	a.next++
	r := &ackRound{id: a.next, results: make([]pubResult, n), left: n, done: make(chan struct{})}
	a.rounds[r.id] = r
	a.mu.Unlock()
	r.replies, r.base = roundReplies(a.prefix, r.id, n)
	if n == 0 {
		close(r.done)
	}
	return r, nil
}

// publish sends m as the i-th message of round r; its answer arrives on
// the round.
func (a *acks) publish(r *ackRound, i int, m *nats.Msg) error {
	m.Reply = r.replyOf(i)
	return a.nc.PublishMsg(m)
}

// roundReplies makes the reply subjects of a round's n messages,
// <prefix><id>.<index>, in one string: one allocation a round, not one a
// message. It returns the string and the length the subjects share before
// the index.
func roundReplies(prefix string, id uint64, n int) (string, int) {
	var idBuf, indexBuf [20]byte
	head := strconv.AppendUint(idBuf[:0], id, 10)
	base := len(prefix) + len(head) + 1
	var b strings.Builder
	b.Grow(replyOffset(base, n))
	for i := range n {
		b.WriteString(prefix)
		b.Write(head)
		b.WriteByte('.')
		b.Write(strconv.AppendInt(indexBuf[:0], int64(i), 10))
	}
	return b.String(), base
}

// replyOf is the reply subject of the round's i-th message.
func (r *ackRound) replyOf(i int) string {
	return r.replies[replyOffset(r.base, i):replyOffset(r.base, i+1)]
}

// replyOffset is where the i-th reply subject starts in a round's
// replies: i subjects before it, each base bytes and its index's digits.
func replyOffset(base, i int) int {
	off := i * base
	// The indexes in [lo, hi) have the same number of digits.
	for lo, hi, digits := 0, 10, 1; lo < i; lo, hi, digits = hi, hi*10, digits+1 {
		off += (min(i, hi) - lo) * digits
	}
	return off
}

// wait returns the answers of the first sent messages of the round once
// each has one, ctx is done or timeout has passed, whichever is first,
// and forgets the round: an answer that comes later is dropped. A message
// without an answer has answered false.
func (a *acks) wait(ctx context.Context, r *ackRound, sent int, timeout time.Duration) []pubResult {
	r.mu.Lock()
	unsent := len(r.results) - sent
	if unsent > 0 { // the unsent never answer: each is one fewer to wait for
		if r.left -= unsent; r.left == 0 {
			close(r.done)
		}
	}
	r.mu.Unlock()
	t := time.NewTimer(timeout)
	select {
	case <-r.done:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	a.mu.Lock()
	delete(a.rounds, r.id)
	a.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.results[:sent]
	r.results = nil // a late answer finds no slot
	return out
}

// receive files one acknowledgement with its round.
func (a *acks) receive(m *nats.Msg) {
	id, i, ok := replyIndex(m.Subject[len(a.prefix):])
	if !ok {
		return
	}
	a.mu.Lock()
	r := a.rounds[id]
	a.mu.Unlock()
	if r == nil {
		return // the round gave up waiting
	}
	res := parsePubAck(m)
	r.mu.Lock()
	defer r.mu.Unlock()
	if i >= len(r.results) || r.results[i].answered {
		return
	}
	res.answered = true
	r.results[i] = res
	if r.left--; r.left == 0 {
		close(r.done)
	}
}

// replyIndex reads "<round>.<index>" off the end of a reply subject.
func replyIndex(tail string) (round uint64, index int, ok bool) {
	dot := strings.IndexByte(tail, '.')
	if dot < 0 {
		return 0, 0, false
	}
	round, err := strconv.ParseUint(tail[:dot], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	index, err = strconv.Atoi(tail[dot+1:])
	return round, index, err == nil && index >= 0
}

// statusHeader is where the server puts the status of a message it
// answers with no body (nats.go keeps its name unexported).
const statusHeader = "Status"

// errNoStream answers a publish no stream took: the server's 503 "no
// responders".
var errNoStream = substate.Errorf(substate.EUNAVAILABLE, "publish: no stream holds the subject (no responders)")

// parsePubAck reads the server's answer to a publish: its sequence and
// duplicate flag from the fixed JSON the server writes
// ({"stream":"S","seq":7,"duplicate": true}), an error answer decoded
// whole.
func parsePubAck(m *nats.Msg) pubResult {
	if len(m.Data) == 0 && m.Header.Get(statusHeader) == "503" {
		return pubResult{Err: errNoStream}
	}
	d := m.Data
	if bytes.Contains(d, []byte(`"error"`)) {
		return pubResult{Err: pubAckError(d)}
	}
	seq, ok := jsonUint(jsonValue(d, `"seq"`))
	if !ok || seq == 0 {
		return pubResult{Err: substate.Errorf(substate.EUNAVAILABLE, "publish: unreadable acknowledgement %.200q", d)}
	}
	return pubResult{Seq: seq, Duplicate: bytes.HasPrefix(jsonValue(d, `"duplicate"`), []byte("true"))}
}

// pubAckError is the error of an error answer.
func pubAckError(d []byte) error {
	var a struct {
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(d, &a); err != nil || a.Error == nil {
		return substate.Errorf(substate.EUNAVAILABLE, "publish: unreadable error answer %.200q", d)
	}
	return substate.WrapError(substate.EUNAVAILABLE, errors.New(a.Error.Description),
		"publish refused (%d, error %d)", a.Error.Code, a.Error.ErrCode)
}

// jsonValue returns what follows key and its colon in d (spaces skipped),
// or nil when d has no such key.
func jsonValue(d []byte, key string) []byte {
	i := bytes.Index(d, []byte(key))
	if i < 0 {
		return nil
	}
	d = bytes.TrimLeft(d[i+len(key):], " ")
	if len(d) == 0 || d[0] != ':' {
		return nil
	}
	return bytes.TrimLeft(d[1:], " ")
}

// jsonUint reads the unsigned integer d begins with.
func jsonUint(d []byte) (uint64, bool) {
	var v uint64
	n := 0
	for ; n < len(d) && d[n] >= '0' && d[n] <= '9'; n++ {
		digit := uint64(d[n] - '0')
		if v > (math.MaxUint64-digit)/10 {
			return 0, false // would overflow
		}
		v = v*10 + digit
	}
	return v, n > 0
}
