package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// Durable consumer names.
const (
	ConsumerNormalizer  = "substate-normalizer"
	ConsumerEventBridge = "substate-eventbridge"
	consumerProjector   = "substate-projector"
)

// ProjectorConsumer returns the durable consumer name of a projector
// instance: every projector replica keeps its own view and its own consumer.
func ProjectorConsumer(instance string) string {
	if instance == "" {
		return consumerProjector
	}
	return consumerProjector + "-" + substate.EncodeToken(instance)
}

// Retention limits one stream: messages older than MaxAge or beyond
// MaxBytes are discarded oldest first. Zero means unlimited.
type Retention struct {
	MaxAge   time.Duration
	MaxBytes int64
}

// Topology is the configuration of substate's streams.
type Topology struct {
	Raw, Events, DLQ Retention
	// Changes is the retention of the change feed, SUBSTATE_CHANGES.
	Changes Retention
	// Duplicates is the window in which a repeated Nats-Msg-Id is dropped by
	// the server; a redelivery after it is still harmless to the view.
	Duplicates time.Duration
	Replicas   int
	// Compression is how the server stores the streams that hold the
	// bulk of the data, SUBSTATE_RAW, SUBSTATE_EVENTS and SUBSTATE_CHANGES
	// (all JSON): S2 takes a third to a half of the disk for a little CPU
	// (docs/performance.md, Disk). SUBSTATE_DLQ, small and rare, is stored
	// as it comes.
	Compression jetstream.StoreCompression
}

// DefaultTopology keeps raw evidence, canonical events and the change feed
// for 30 days, dead letters for 90, and drops duplicates within 10 minutes:
// JetStream keeps every id of the window in memory, and the view is
// idempotent by revision, so a later repeat changes nothing
// (docs/pipeline.md).
func DefaultTopology() Topology {
	const day = 24 * time.Hour
	return Topology{
		Raw:         Retention{MaxAge: 30 * day},
		Events:      Retention{MaxAge: 30 * day},
		DLQ:         Retention{MaxAge: 90 * day},
		Changes:     Retention{MaxAge: 30 * day},
		Duplicates:  10 * time.Minute,
		Replicas:    1,
		Compression: jetstream.S2Compression,
	}
}

// StreamConfigs returns the configuration of the four streams.
func (t Topology) StreamConfigs() []jetstream.StreamConfig {
	return []jetstream.StreamConfig{
		t.compressed(t.stream(substate.StreamRaw, substate.SubjectRawPrefix+">", t.Raw,
			"provider status payloads as received: the evidence behind every canonical event")),
		t.compressed(t.stream(substate.StreamEvents, substate.SubjectEventsPrefix+"*", t.Events,
			"canonical sub-state events (CloudEvents 1.0 JSON), one subject per tenant")),
		t.stream(substate.StreamDLQ, substate.SubjectDLQPrefix+">", t.DLQ,
			"input substate could not process: original bytes and headers, reason and stage"),
		t.compressed(t.stream(substate.StreamChanges, substate.ChangesStreamSubject, t.Changes,
			"real changes of tenant views (CloudEvents 1.0 JSON), on substate.changes.<subState>.<provider>.<tenant>, Nats-Msg-Id = the change's sequence")),
	}
}

// compressed returns cfg stored with the topology's compression.
func (t Topology) compressed(cfg jetstream.StreamConfig) jetstream.StreamConfig {
	cfg.Compression = t.Compression
	return cfg
}

func (t Topology) stream(name, subject string, r Retention, desc string) jetstream.StreamConfig {
	maxBytes := r.MaxBytes
	if maxBytes == 0 {
		maxBytes = -1
	}
	replicas := max(t.Replicas, 1)
	return jetstream.StreamConfig{
		Name:        name,
		Description: desc,
		Subjects:    []string{subject},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Storage:     jetstream.FileStorage,
		MaxAge:      r.MaxAge,
		MaxBytes:    maxBytes,
		MaxMsgs:     -1,
		Duplicates:  min(t.Duplicates, nonZero(r.MaxAge)),
		Replicas:    replicas,
		AllowDirect: true,
	}
}

func nonZero(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Duration(1<<63 - 1)
	}
	return d
}

// EnsureStreams creates the streams, or updates those whose
// configuration differs. A stream already as configured is left alone, so
// a worker starts even while a cluster cannot place a change (a node down).
func (t Topology) EnsureStreams(ctx context.Context, js jetstream.JetStream) error {
	for _, cfg := range t.StreamConfigs() {
		if err := ensureStream(ctx, js, cfg); err != nil {
			return err
		}
	}
	return nil
}

// ensureStream creates a stream, or updates it when its configuration
// differs; one already as configured is left alone.
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	if s, err := js.Stream(ctx, cfg.Name); err == nil && sameStream(s.CachedInfo().Config, cfg) {
		return nil
	}
	if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
	}
	return nil
}

// sameStream reports whether an existing stream has the settings substate
// declares. AllowDirect is one: substate reads its streams with direct
// gets only, so a stream created without them is updated.
func sameStream(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.MaxAge == want.MaxAge && have.AllowDirect == want.AllowDirect &&
		have.MaxBytes == want.MaxBytes && have.Duplicates == want.Duplicates &&
		have.Replicas == want.Replicas && have.Description == want.Description &&
		have.Retention == want.Retention && have.Discard == want.Discard && have.Storage == want.Storage &&
		have.Compression == want.Compression
}

// ConsumerConfig returns a durable pull consumer configuration with explicit
// acks. MaxDeliver is unlimited on purpose: substate dead-letters a message
// itself after a bounded number of deliveries, with its reason, so the server
// never drops one silently.
func ConsumerConfig(name string, ackWait time.Duration, replicas int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       name,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxDeliver:    -1,
		MaxAckPending: 20000,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		Replicas:      max(replicas, 1),
	}
}

// ProjectorConsumerConfig returns the durable consumer configuration of a
// projector instance. Its acknowledgements are cumulative (AckAll): the
// projector applies the stream in order and stores the sequence it reached
// in the view, so after each commit one ack of the batch's last message
// covers the whole batch, instead of one ack for every event. Only the
// instance that owns it reads this consumer.
func ProjectorConsumerConfig(instance string, ackWait time.Duration, replicas int) jetstream.ConsumerConfig {
	cfg := ConsumerConfig(ProjectorConsumer(instance), ackWait, replicas)
	cfg.AckPolicy = jetstream.AckAllPolicy
	return cfg
}

// EnsureConsumer creates a durable consumer on stream, or updates it when
// its settings differ; one already as configured is left alone.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	if c, err := js.Consumer(ctx, stream, cfg.Durable); err == nil && sameConsumer(c.CachedInfo().Config, cfg) {
		return c, nil
	}
	c, err := js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("ensure consumer %s on %s: %w", cfg.Durable, stream, err)
	}
	return c, nil
}

// sameConsumer reports whether an existing consumer has the settings
// substate declares (its start position cannot change and is not compared).
func sameConsumer(have, want jetstream.ConsumerConfig) bool {
	return have.AckPolicy == want.AckPolicy && have.AckWait == want.AckWait && have.MaxDeliver == want.MaxDeliver &&
		have.MaxAckPending == want.MaxAckPending && have.Replicas == want.Replicas
}

// ConsumerFrom returns the durable consumer positioned to deliver stream
// sequences after checkpoint. A consumer whose acknowledged floor is already
// past the checkpoint (its view was lost or restored from an older copy) is
// recreated from checkpoint+1, so the view is rebuilt instead of left behind;
// so is one with another ack policy, which the server cannot update (the
// checkpoint, not the consumer, says what the view holds).
func ConsumerFrom(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig, checkpoint uint64) (jetstream.Consumer, error) {
	c, err := js.Consumer(ctx, stream, cfg.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
	case err != nil:
		return nil, fmt.Errorf("consumer %s: %w", cfg.Durable, err)
	case c.CachedInfo().AckFloor.Stream <= checkpoint && c.CachedInfo().Config.AckPolicy == cfg.AckPolicy:
		// Keep the start position it was created with: it cannot be updated.
		info := c.CachedInfo().Config
		cfg.DeliverPolicy, cfg.OptStartSeq = info.DeliverPolicy, info.OptStartSeq
		return EnsureConsumer(ctx, js, stream, cfg)
	default:
		if err := js.DeleteConsumer(ctx, stream, cfg.Durable); err != nil {
			return nil, fmt.Errorf("reset consumer %s: %w", cfg.Durable, err)
		}
	}
	if checkpoint > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, checkpoint+1
	}
	return EnsureConsumer(ctx, js, stream, cfg)
}
