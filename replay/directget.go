package replay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A read asks the stream for its messages in batches of direct gets
// (JetStream's $JS.API.DIRECT.GET with a batch size): the server answers
// each request from its store and keeps nothing for the reader, so reads
// hold no consumer on the server however many run, and one that ends early
// (an error, a client gone) leaves nothing behind.
const (
	// directBatch is how many messages one request asks for.
	directBatch = 256
	// directMaxBytes bounds the bytes one request's answer carries (the
	// server always sends at least one message).
	directMaxBytes = 1 << 20
)

// directRequest is the body of a batched direct get
// (nats-server's JSApiMsgGetRequest).
type directRequest struct {
	Seq       uint64     `json:"seq,omitempty"`
	NextFor   string     `json:"next_by_subj,omitempty"`
	Batch     int        `json:"batch"`
	MaxBytes  int        `json:"max_bytes"`
	StartTime *time.Time `json:"start_time,omitempty"`
}

// Headers the server adds to a direct get's answer; a Message carries the
// headers it was stored with, without them.
var directHeaders = []string{
	jetstream.StreamHeader, jetstream.SubjectHeader, jetstream.SequenceHeader, jetstream.TimeStampHeaer,
	"Nats-Num-Pending", jetstream.LastSequenceHeader,
}

// errEndOfBatch is the server's end of one batch: more may follow.
var errEndOfBatch = errors.New("end of batch")

// errNoAnswer is a server that did not answer in time.
var errNoAnswer = errors.New("no answer from the server")

// errNoMessages is the server's answer when no message is at or after the
// requested position.
var errNoMessages = errors.New("no messages")

// directRead is one read of a stream by batched direct gets.
type directRead struct {
	nc      *nats.Conn
	subject string // the API subject of the stream's direct gets
	leader  string // the API subject of the message gets its leader answers
	sub     *nats.Subscription
	idle    time.Duration // how long to wait for each answer
	pending uint64        // what the last end of batch said was left
}

// openDirect subscribes to a fresh inbox for the answers of one read.
func openDirect(js jetstream.JetStream, stream string, idle time.Duration) (*directRead, error) {
	nc := js.Conn()
	sub, err := nc.SubscribeSync(nc.NewInbox())
	if err != nil {
		return nil, err
	}
	prefix := apiPrefix(js)
	return &directRead{nc: nc, subject: prefix + "DIRECT.GET." + stream, leader: prefix + "STREAM.MSG.GET." + stream, sub: sub, idle: idle}, nil
}

// apiPrefix is where js sends JetStream API requests, ending in a dot.
func apiPrefix(js jetstream.JetStream) string {
	p := cmp.Or(js.Options().APIPrefix, jetstream.DefaultAPIPrefix)
	if !strings.HasSuffix(p, ".") {
		p += "."
	}
	return p
}

// close drops the read's inbox.
func (d *directRead) close() { _ = d.sub.Unsubscribe() }

// request asks for the next batch.
func (d *directRead) request(req directRequest) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	return d.nc.PublishRequest(d.subject, d.sub.Subject, body)
}

// next returns the next message of the batch asked for, errEndOfBatch at
// its end, or errNoMessages when there was nothing to send.
func (d *directRead) next(ctx context.Context) (Message, error) {
	wait, cancel := context.WithTimeoutCause(ctx, d.idle, errNoAnswer)
	defer cancel()
	msg, err := d.sub.NextMsgWithContext(wait)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return Message{}, ctx.Err()
	case errors.Is(context.Cause(wait), errNoAnswer):
		return Message{}, fmt.Errorf("%w within %s", errNoAnswer, d.idle)
	default:
		return Message{}, err
	}
	if status := msg.Header.Get("Status"); len(msg.Data) == 0 && status != "" {
		return Message{}, d.status(msg, status)
	}
	return directMessage(msg)
}

// status reads a status answer: the end of a batch, nothing to send, or a
// refusal.
func (d *directRead) status(msg *nats.Msg, status string) error {
	switch status {
	case "204":
		d.pending, _ = strconv.ParseUint(msg.Header.Get("Nats-Num-Pending"), 10, 64)
		return errEndOfBatch
	case "404":
		return errNoMessages
	case "503":
		return errors.New("the stream does not answer direct gets (no responders)")
	}
	return fmt.Errorf("direct get refused: %s %s", status, msg.Header.Get("Description"))
}

// directMessage turns one answer into the stored message.
func directMessage(msg *nats.Msg) (Message, error) {
	seq, err := strconv.ParseUint(msg.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return Message{}, fmt.Errorf("direct get answer without a sequence: %w", err)
	}
	stored, err := time.Parse(time.RFC3339Nano, msg.Header.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return Message{}, fmt.Errorf("direct get answer without a time: %w", err)
	}
	m := Message{Seq: seq, Subject: msg.Header.Get(jetstream.SubjectHeader), Stored: stored, Header: msg.Header, Data: msg.Data}
	stripDirect(m.Header)
	return m, nil
}

// stripDirect removes the headers a direct get adds.
func stripDirect(h nats.Header) {
	for _, k := range directHeaders {
		h.Del(k)
	}
}

// leaderRequest is the body of a message get the stream's leader answers
// (nats-server's JSApiMsgGetRequest without a batch).
type leaderRequest struct {
	Seq       uint64     `json:"seq,omitempty"`
	NextFor   string     `json:"next_by_subj,omitempty"`
	StartTime *time.Time `json:"start_time,omitempty"`
}

// leaderAnswer is its answer (nats-server's JSApiMsgGetResponse).
type leaderAnswer struct {
	Error *struct {
		Code    int    `json:"code"`
		ErrCode int    `json:"err_code"`
		Desc    string `json:"description"`
	} `json:"error"`
	Message *struct {
		Subject  string    `json:"subject"`
		Sequence uint64    `json:"seq"`
		Header   []byte    `json:"hdrs"`
		Data     []byte    `json:"data"`
		Time     time.Time `json:"time"`
	} `json:"message"`
}

// errNoMessageFound is nats-server's JSNoMessageFoundErr.
const errNoMessageFound = 10037

// leaderNext asks the stream's leader for the first message at or after
// req's position on subject ("" for any); ok is false when there is none.
// On a cluster any replica answers a direct get, and one that lags behind
// the leader ends a read early; the leader says whether it did.
func (d *directRead) leaderNext(ctx context.Context, req directRequest, subject string) (Message, bool, error) {
	lr := leaderRequest{Seq: req.Seq, NextFor: cmp.Or(subject, ">"), StartTime: req.StartTime}
	if lr.StartTime != nil {
		lr.Seq = 0
	}
	return leaderGet(ctx, d.nc, d.leader, d.idle, lr)
}

// leaderGet sends one message get to the stream's leader at the API
// subject subj and waits up to wait for its answer.
func leaderGet(ctx context.Context, nc *nats.Conn, subj string, wait time.Duration, lr leaderRequest) (m Message, ok bool, err error) {
	body, err := json.Marshal(lr)
	if err != nil {
		return m, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	resp, err := nc.RequestWithContext(ctx, subj, body)
	if err != nil {
		return m, false, err
	}
	var a leaderAnswer
	if err := json.Unmarshal(resp.Data, &a); err != nil {
		return m, false, fmt.Errorf("message get answer: %w", err)
	}
	switch {
	case a.Error != nil && a.Error.ErrCode == errNoMessageFound:
		return m, false, nil
	case a.Error != nil:
		return m, false, fmt.Errorf("message get refused: %s", a.Error.Desc)
	case a.Message == nil:
		return m, false, errors.New("message get answered without a message")
	}
	m = Message{Seq: a.Message.Sequence, Subject: a.Message.Subject, Stored: a.Message.Time, Data: a.Message.Data}
	if len(a.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(a.Message.Header); err != nil {
			return m, false, fmt.Errorf("message get answer: %w", err)
		}
	}
	return m, true, nil
}
