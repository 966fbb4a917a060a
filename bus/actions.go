package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// ConsumerActions is the durable consumer workers take fleet jobs from.
const ConsumerActions = "substate-actions"

// Retention of the fleet jobs' streams.
const (
	// ActionsMaxAge is how long a job's record (request, frozen set,
	// intents, state) is kept; its outcomes stay on SUBSTATE_AUDIT.
	ActionsMaxAge = 90 * 24 * time.Hour
	// LeaseTime is how long a per-execution lease holds when the job that
	// took it does not release it (its worker stopped): longer than one
	// action and its read-back, so a lease never ends under a call.
	LeaseTime = 10 * time.Minute
)

// ActionsStreamConfig is the configuration of SUBSTATE_ACTIONS.
func (t Topology) ActionsStreamConfig() jetstream.StreamConfig {
	cfg := t.stream(substate.StreamActions, substate.SubjectActionsPrefix+">", Retention{MaxAge: ActionsMaxAge},
		"fleet jobs: each job's request and frozen set, its intents before provider calls, its controls and state; outcomes are on SUBSTATE_AUDIT")
	cfg.Duplicates = min(max(cfg.Duplicates, DefaultTopology().Duplicates), ActionsMaxAge)
	return cfg
}

// LeasesStreamConfig is the configuration of SUBSTATE_LEASES: one message
// per execution a job is acting on, created only where none is
// (Nats-Expected-Last-Subject-Sequence 0), purged when the job is done
// with it, dropped after LeaseTime otherwise.
func (t Topology) LeasesStreamConfig() jetstream.StreamConfig {
	cfg := t.stream(substate.StreamLeases, substate.SubjectLeasesPrefix+">", Retention{MaxAge: LeaseTime},
		"per-execution leases of fleet jobs: two jobs never act on one execution at once")
	cfg.MaxMsgsPerSubject = 1
	return cfg
}

// EnsureActionStreams creates SUBSTATE_ACTIONS and SUBSTATE_LEASES, or
// updates them when their configuration differs.
func (t Topology) EnsureActionStreams(ctx context.Context, js jetstream.JetStream) error {
	for _, cfg := range []jetstream.StreamConfig{t.ActionsStreamConfig(), t.LeasesStreamConfig()} {
		if err := ensureStream(ctx, js, cfg); err != nil {
			return err
		}
	}
	return nil
}
