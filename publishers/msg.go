package publishers

import "github.com/nats-io/nats.go"

// msgBuilder builds a message whose header values share one backing
// array: nats.Header.Set makes a slice for every value, which on the hot
// path is an allocation per header of every message published.
type msgBuilder struct {
	m    *nats.Msg
	vals []string
	body []byte // the buffer of the last body built, free again once it was sent (see reuse)
}

// newMsg starts a message on subject with data and room for n header
// values without further allocation.
func newMsg(subject string, data []byte, n int) msgBuilder {
	return msgBuilder{
		m:    &nats.Msg{Subject: subject, Data: data, Header: make(nats.Header, n)},
		vals: make([]string, 0, n),
	}
}

// reuse makes b build the next message on subject with data in the
// message, header map and value array of the last one, which must have
// been sent: nats.Conn.PublishMsg copies a message out before it
// returns, so a sender of one message at a time needs one of each.
func (b *msgBuilder) reuse(subject string, data []byte, n int) {
	if b.m == nil {
		*b = newMsg(subject, data, n)
		return
	}
	clear(b.m.Header)
	b.m.Subject, b.m.Reply, b.m.Data = subject, "", data
	b.vals = b.vals[:0]
}

// set sets the header key to the single value v, as nats.Header.Set does
// (case-sensitive, replacing any earlier value).
func (b *msgBuilder) set(k, v string) {
	if i := len(b.vals); i < cap(b.vals) {
		b.vals = append(b.vals, v)
		b.m.Header[k] = b.vals[i : i+1 : i+1]
		return
	}
	b.m.Header[k] = []string{v}
}
