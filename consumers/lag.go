package consumers

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// OldestUnprocessed returns when the oldest message a durable consumer
// has not processed was stored on its stream: the first message after the
// consumer's ack floor that its filter matches. It is the zero time when
// the consumer has nothing pending. Its cost is one direct get by
// sequence per filter subject (one with none), whatever the backlog.
func OldestUnprocessed(ctx context.Context, s jetstream.Stream, info *jetstream.ConsumerInfo) (time.Time, error) {
	if info.NumPending == 0 && info.NumAckPending == 0 {
		return time.Time{}, nil
	}
	subjects := info.Config.FilterSubjects
	if info.Config.FilterSubject != "" {
		subjects = []string{info.Config.FilterSubject}
	}
	if len(subjects) == 0 {
		subjects = []string{">"}
	}
	var oldest time.Time
	for _, subj := range subjects {
		m, err := s.GetMsg(ctx, info.AckFloor.Stream+1, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // nothing of it after the floor (acknowledged meanwhile)
		} else if err != nil {
			return time.Time{}, err
		}
		if oldest.IsZero() || m.Time.Before(oldest) {
			oldest = m.Time
		}
	}
	return oldest, nil
}

var consumerAgeDesc = prometheus.NewDesc("substate_consumer_oldest_unprocessed_age_seconds",
	"Age of the oldest message a durable consumer has not processed (stored on its stream after the consumer's ack floor), 0 when it has none: the consumer's lag as a time.",
	[]string{"consumer"}, nil)

// ConsumerAges exports substate_consumer_oldest_unprocessed_age_seconds:
// per consumer, the age at the scrape of the oldest unprocessed message a
// watcher last found (Set, on a short interval, see OldestUnprocessed).
// The age grows between two looks, as the backlog's does.
type ConsumerAges struct {
	Now func() time.Time // nil means time.Now

	mu     sync.Mutex
	oldest map[string]time.Time // consumer → stored time; zero for none
}

// Set records the stored time of a consumer's oldest unprocessed
// message; the zero time says it has none.
func (a *ConsumerAges) Set(consumer string, oldest time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.oldest == nil {
		a.oldest = map[string]time.Time{}
	}
	a.oldest[consumer] = oldest
}

// Describe sends the one metric's description.
func (a *ConsumerAges) Describe(ch chan<- *prometheus.Desc) { ch <- consumerAgeDesc }

// Collect sends one gauge per consumer Set was called for.
func (a *ConsumerAges) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	if a.Now != nil {
		now = a.Now()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for consumer, oldest := range a.oldest {
		age := 0.0
		if !oldest.IsZero() {
			age = max(now.Sub(oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(consumerAgeDesc, prometheus.GaugeValue, age, consumer)
	}
}
