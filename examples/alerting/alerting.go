// Command alerting is an example downstream service of substate: it keeps
// a durable consumer on the change feed (stream SUBSTATE_CHANGES) with a
// subject filter, reads each change with the CloudEvents SDK for Go and
// raises an alert for every tenant whose workflow failed.
//
// It connects as substate's read-only subscriber identity:
//
//	go run ./examples/alerting --nats-url nats://127.0.0.1:4222 \
//	    --nkey data/nats/credentials/subscriber.nk
//
// Started after substate has already projected changes, it receives every
// one the stream retains (the consumer delivers from the start), then live
// ones; stopped and started again, it goes on where it left off, since the
// durable consumer remembers what it acknowledged.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	ceclient "github.com/cloudevents/sdk-go/v2/client"
	"github.com/cloudevents/sdk-go/v2/protocol"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// Config says where the change feed is and what to read of it.
type Config struct {
	URL      string // NATS server
	NkeyFile string // the subscriber identity's seed (subscriber.nk)
	Durable  string // durable consumer name: the service's bookmark
	Filter   string // subject filter, e.g. substate.changes.failed.>
}

func main() {
	var c Config
	flag.StringVar(&c.URL, "nats-url", "nats://127.0.0.1:4222", "NATS server of substate")
	flag.StringVar(&c.NkeyFile, "nkey", "data/nats/credentials/subscriber.nk", "seed file of substate's subscriber identity")
	flag.StringVar(&c.Durable, "durable", "alerting", "durable consumer name")
	flag.StringVar(&c.Filter, "filter", substate.SubjectChangesPrefix+"failed.>", "subject filter on the change feed")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "alerting:", err)
		os.Exit(1)
	}
}

// Run alerts on every change of the filtered feed until ctx is done.
func Run(ctx context.Context, c Config, out io.Writer) error {
	return Consume(ctx, c, func(ch substate.Change, e cloudevents.Event) {
		if ch.New.WorkflowSubState == substate.StateFailed {
			fmt.Fprintf(out, "ALERT tenant %s failed (execution %s, %d retries): %s\n", ch.TenantID,
				ch.New.WorkflowExecutionID, ch.New.WorkflowRetryCount, ch.New.WorkflowErrorMessage)
			return
		}
		fmt.Fprintf(out, "%s tenant %s: %s → %s\n", e.Type(), ch.TenantID, ch.Old.WorkflowSubState, ch.New.WorkflowSubState)
	})
}

// Consume hands every change of the filtered feed to fn, in order, until
// ctx is done. A change fn has returned for is acknowledged; the durable
// consumer delivers the rest again after a restart.
func Consume(ctx context.Context, c Config, fn func(substate.Change, cloudevents.Event)) error {
	opts := []nats.Option{nats.Name("alerting"), nats.CustomInboxPrefix("_INBOX_subscriber")}
	if c.NkeyFile != "" {
		key, err := nats.NkeyOptionFromSeed(c.NkeyFile)
		if err != nil {
			return err
		}
		opts = append(opts, key)
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, substate.StreamChanges, jetstream.ConsumerConfig{
		Durable: c.Durable, FilterSubject: c.Filter, AckPolicy: jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy, AckWait: 30 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("consumer %s on %s: %w", c.Durable, substate.StreamChanges, err)
	}
	msgs, err := cons.Messages()
	if err != nil {
		return err
	}
	defer msgs.Stop()
	// One poller and a blocking callback: changes are handled one at a
	// time, in the feed's order.
	client, err := cloudevents.NewClient(&receiver{msgs: msgs},
		ceclient.WithPollGoroutines(1), ceclient.WithBlockingCallback())
	if err != nil {
		return err
	}
	err = client.StartReceiver(ctx, func(e cloudevents.Event) protocol.Result {
		if err := e.Validate(); err != nil {
			return protocol.NewReceipt(false, "invalid cloudevent: %v", err)
		}
		var ch substate.Change
		if err := e.DataAs(&ch); err != nil {
			return protocol.NewReceipt(false, "change data: %v", err)
		}
		fn(ch, e)
		return protocol.ResultACK
	})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// receiver is a CloudEvents protocol.Receiver over a JetStream pull
// consumer: each message is read as CloudEvents NATS messages are, in
// structured mode (Content-Type application/cloudevents+json) or in binary
// mode (ce-* headers), and acknowledged when the client finishes it with an
// ACK, or handed back with a delay otherwise. (The SDK's NATS JetStream
// binding does the same; this keeps the example on the SDK's core module.)
type receiver struct{ msgs jetstream.MessagesContext }

var _ protocol.Receiver = (*receiver)(nil)

func (r *receiver) Receive(ctx context.Context) (binding.Message, error) {
	m, err := r.msgs.Next(jetstream.NextContext(ctx))
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return nil, io.EOF
		}
		return nil, err
	}
	header := http.Header{}
	for k, vs := range m.Headers() {
		header[http.CanonicalHeaderKey(strings.ToLower(k))] = vs
	}
	msg := cehttp.NewMessage(header, io.NopCloser(strings.NewReader(string(m.Data()))))
	msg.OnFinish = func(result error) error {
		if protocol.IsACK(result) {
			return m.Ack()
		}
		return m.NakWithDelay(5 * time.Second)
	}
	return msg, nil
}
