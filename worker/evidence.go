package worker

import (
	"context"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/replay"
)

// checkEvidence checks, every --evidence-check-interval, the canonical
// events that arrived since the last check against their raw evidence,
// as "substate verify" does, and counts them by outcome in
// substate_evidence_events_total: an event published on SUBSTATE_EVENTS by
// anyone but the normalizer is counted forged or missing, and logged. It
// starts after the view's checkpoint, so events that came while the
// worker was down are checked too, and a restart does not check the whole
// stream again. It runs only with a positive interval (see actors).
func (w *Worker) checkEvidence(ctx context.Context) error {
	ch, err := w.EvidenceChecker()
	if err != nil {
		return err
	}
	ch.Metrics = w.evidence
	log := w.Logger.With("component", "evidence")
	next, err := w.View.Checkpoint(ctx)
	if err != nil {
		return err
	}
	next++
	t := time.NewTicker(w.Flags.EvidenceCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		_, last, _, err := ch.Reader.Bounds(ctx, substate.StreamEvents)
		if err != nil || last < next {
			continue // NATS away, or nothing new: the next tick tries again
		}
		res, err := ch.Run(ctx, replay.Range{FromSeq: next, ToSeq: last})
		if err != nil {
			log.Warn("evidence check failed; the next one retries", "err", err)
			continue
		}
		log.Debug("evidence checked", "from", res.FirstSeq, "to", res.LastSeq, "events", res.LastSeq-res.FirstSeq+1, "busy", res.Busy)
		for _, f := range res.Findings {
			log.Error("canonical event without its evidence", "seq", f.Seq, "tenant", f.TenantID, "event", f.EventID, "outcome", f.Outcome, "reason", f.Reason)
		}
		next = last + 1
	}
}

// EvidenceChecker returns the check the worker runs against the raw
// evidence: its tenant rules, the mapping of this version and
// --evidence-check-budget, without metrics.
func (w *Worker) EvidenceChecker() (*replay.Checker, error) {
	rules, err := mapping.ParseTenantRules(w.Flags.TenantRule...)
	if err != nil {
		return nil, err
	}
	return &replay.Checker{
		Reader: &replay.Reader{JS: w.Bus.JetStream}, Mapper: mapping.New(mapping.Config{Tenants: rules}),
		EventID: mapping.EventID, EventIDOf: mapping.EventIDOf, MappingVersion: mapping.Version,
		Budget: w.Flags.EvidenceCheckBudget,
	}, nil
}
