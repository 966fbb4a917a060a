// Command alerting is an example downstream service of substate: it keeps
// a durable consumer on the change feed (stream SUBSTATE_CHANGES) with a
// subject filter, reads each change with the CloudEvents SDK for Go and its
// NATS JetStream protocol binding, and raises an alert for every tenant
// whose workflow failed.
//
// It connects as substate's read-only subscriber identity, which creates
// consumers only under the names substate grants it:
//
//	substate run --subscriber-consumers alerting
//	go run ./examples/alerting --nats-url nats://127.0.0.1:4222 \
//	    --nkey data/nats/credentials/subscriber.nk
//
// Started after substate has already projected changes, it receives every
// one the stream retains (the consumer delivers from the start), then live
// ones; stopped and started again, it goes on where it left off, since the
// durable consumer remembers what it acknowledged. Replicas started with the
// same --durable share the changes between them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	cejs "github.com/cloudevents/sdk-go/protocol/nats_jetstream/v2"
	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	ceclient "github.com/cloudevents/sdk-go/v2/client"
	"github.com/cloudevents/sdk-go/v2/protocol"
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
//
// The feed is read with the CloudEvents NATS JetStream binding. Its
// consumer only subscribes: the durable consumer is created here first,
// with the subscriber identity's rights, and the binding binds to it.
// Binding to it matters twice: nats.go deletes a durable consumer it
// created itself when the subscription is drained, which would make every
// restart replay the whole feed; and the binding asks for the stream's
// info and would try to add the stream if it could not read it, which the
// subscriber may not do (substate declares SUBSTATE_CHANGES, and the
// subscriber may read its info, so the binding never tries).
func Consume(ctx context.Context, c Config, fn func(substate.Change, cloudevents.Event)) error {
	opts := []nats.Option{nats.Name("alerting"), nats.CustomInboxPrefix(inboxPrefix)}
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
	// A push consumer (the binding subscribes, it does not pull) delivering
	// to an inbox of the subscriber's own, through a deliver group named
	// after it: without one, nats.go refuses to bind while the server still
	// counts a previous subscription, after a quick restart or from a
	// second replica, which now share the work instead. One change in
	// flight at a time keeps the feed's order, even across a restart or a
	// redelivery.
	_, err = js.CreateOrUpdatePushConsumer(ctx, substate.StreamChanges, jetstream.ConsumerConfig{
		Durable: c.Durable, FilterSubject: c.Filter, DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: 1,
		DeliverSubject: inboxPrefix + ".deliver." + c.Durable, DeliverGroup: c.Durable,
	})
	if errors.Is(err, context.DeadlineExceeded) {
		// The server does not answer a request the identity may not make.
		return fmt.Errorf("consumer %s on %s: %w (the subscriber identity creates consumers only under the names substate run grants it: start substate with --subscriber-consumers %s)", c.Durable, substate.StreamChanges, err, c.Durable)
	} else if err != nil {
		return fmt.Errorf("consumer %s on %s: %w", c.Durable, substate.StreamChanges, err)
	}
	consumer, err := cejs.NewConsumerFromConn(nc, substate.StreamChanges, c.Filter, nil,
		[]nats.SubOpt{nats.Bind(substate.StreamChanges, c.Durable), nats.ManualAck()},
		cejs.WithQueueSubscriber(c.Durable))
	if err != nil {
		return fmt.Errorf("bind %s on %s: %w", c.Durable, substate.StreamChanges, err)
	}
	// One poller and a blocking callback: changes are handled one at a
	// time, in the feed's order.
	client, err := cloudevents.NewClient(acking{consumer},
		ceclient.WithPollGoroutines(1), ceclient.WithBlockingCallback())
	if err != nil {
		return err
	}
	// The client has validated the event before it calls this.
	err = client.StartReceiver(ctx, func(e cloudevents.Event) protocol.Result {
		var ch substate.Change
		if err := e.DataAs(&ch); err != nil {
			return protocol.NewReceipt(false, "change data: %v", err)
		}
		fn(ch, e)
		return protocol.ResultACK
	})
	handBack(consumer)
	return err
}

// handBack gives the server back a change that reached the binding as the
// service stopped, so that the next start receives it at once rather than
// after the ack wait; it waits a second for one.
func handBack(consumer *cejs.Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for {
		m, err := consumer.Receive(ctx)
		if err != nil {
			return
		}
		_ = m.(*cejs.Message).Msg.Nak()
	}
}

// inboxPrefix is where substate's subscriber identity may receive.
const inboxPrefix = "_INBOX_subscriber"

// acking is the binding's consumer with acknowledgements: the binding's
// messages leave them to the application (their Finish does nothing), and
// a durable consumer needs them, after the change is handled and not
// before.
type acking struct{ *cejs.Consumer }

func (a acking) Receive(ctx context.Context) (binding.Message, error) {
	m, err := a.Consumer.Receive(ctx)
	if err != nil {
		return nil, err
	}
	return acked{m.(*cejs.Message)}, nil
}

// acked acknowledges a handled change. One the client refused (not a valid
// CloudEvent, or not a change) will not get better by being delivered
// again: it is terminated, and the client logs why.
type acked struct{ *cejs.Message }

func (m acked) Finish(result error) error {
	if protocol.IsACK(result) {
		return m.Msg.Ack()
	}
	if err := m.Msg.Term(); err != nil {
		return err
	}
	return fmt.Errorf("change refused and terminated: %w", result)
}
