package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/publishers"
)

// ForwardFlags configure the optional EventBridge forwarder.
type ForwardFlags struct {
	EventBridgeBus string `name:"eventbridge-bus" help:"Also publish canonical events to this Amazon EventBridge bus (AWS configuration from the SDK's default chain: AWS_REGION, credentials, AWS_ENDPOINT_URL)."`
}

// openForwarder creates the forwarder's durable consumer and publisher when
// --eventbridge-bus is set.
func (w *Worker) openForwarder(ctx context.Context) error {
	if w.Flags.EventBridgeBus == "" {
		return nil
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("aws configuration for --eventbridge-bus: %w", err)
	}
	c, err := bus.EnsureConsumer(ctx, w.Bus.JetStream, substate.StreamEvents,
		bus.ConsumerConfig(bus.ConsumerEventBridge, time.Minute, w.Flags.NATSReplicas))
	if err != nil {
		return err
	}
	eb := publishers.NewEventBridge(eventbridge.NewFromConfig(cfg), w.Flags.EventBridgeBus)
	w.registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "substate_eventbridge_published_total", Help: "Events EventBridge accepted."},
			func() float64 { return float64(eb.Published()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "substate_eventbridge_failed_total", Help: "Events EventBridge did not accept after retries."},
			func() float64 { return float64(eb.Failed()) }),
	)
	w.forwarder = &consumers.Forwarder{
		Consumer: c, Publisher: eb, DeadLetters: publishers.NewJetStream(w.Bus.JetStream),
		Retry: consumers.Retry{MaxDeliveries: w.Flags.MaxDeliveries}, Metrics: w.Metrics,
		Logger: w.Logger.With("component", "eventbridge"),
	}
	w.Logger.Info("forwarding canonical events to eventbridge", "bus", w.Flags.EventBridgeBus)
	return nil
}
