package restate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/reconcile"
)

// pollIDs queries one batch of ids and publishes the rows. A batch the
// admin API refuses (it answered with an error) is split in halves until
// the refused ids stand alone; those are settled at the end of the sweep.
// Other failures (unreachable, throttled, unauthorized) end the sweep.
func (p *Poller) pollIDs(ctx context.Context, s *restateSweep, ids []string) error {
	if err := p.pacer.Wait(ctx, 1); err != nil {
		return err
	}
	rows, err := p.Admin.Query(ctx, restateQuery(p.Columns, ids))
	if err != nil {
		if !answered(err) {
			s.res.Polled += len(ids)
			s.res.Failed += len(ids)
			p.Metrics.CountPolls(substate.ProviderRestate, substate.ErrorCode(err), len(ids))
			return err
		}
		if len(ids) == 1 {
			s.refused[ids[0]] = err
			return nil
		}
		half := len(ids) / 2
		if err := p.pollIDs(ctx, s, ids[:half]); err != nil {
			return err
		}
		return p.pollIDs(ctx, s, ids[half:])
	}
	s.answered = true
	s.res.Polled += len(ids)
	polled := polledRows(rows)
	p.readInputs(ctx, polled)
	found := make(map[string]bool, len(rows))
	for _, row := range polled {
		if err := p.publishRow(ctx, s, row); err != nil {
			return err
		}
		found[row.facts.ID] = row.err == nil
	}
	for _, id := range ids {
		if !found[id] {
			s.res.Failed++
			p.Metrics.CountPolls(substate.ProviderRestate, substate.ENOTFOUND, 1)
			p.reportMissing(id, "restate has no sys_invocation row for this invocation (a completed invocation is kept only for its completion_retention, 24 h by default); its outcome is unknown")
		}
	}
	return nil
}

// publishRow publishes one row, with its journal's failure events and its
// handler's retry policy attached when it needs them, after the rows of
// the pauses no poll saw (see withFailures). A row the poller published
// last time for its invocation is not sent again. A row without an id is
// logged and skipped.
func (p *Poller) publishRow(ctx context.Context, s *restateSweep, pr polledRow) error {
	f := pr.facts
	if pr.err != nil {
		p.logger().Warn("restate admin query returned a row without an id; skipped", "err", pr.err)
		return nil
	}
	row, derived := p.withFailures(ctx, f, p.withInput(f, pr.raw))
	for _, d := range derived {
		df, err := factsOf(d)
		if err != nil {
			continue
		}
		if err := p.publish(ctx, s, restateRaw(f.ID, df.ModifiedAt, d)); err != nil {
			return err
		}
	}
	if raw := restateRaw(f.ID, f.ModifiedAt, row); p.sent[f.ID] != raw.ID {
		if err := p.publish(ctx, s, raw); err != nil {
			return err
		}
		p.sent[f.ID] = raw.ID
	}
	if e, ok := p.journals[f.ID]; ok {
		if t, err := parseRestateTime(f.ModifiedAt); err == nil && t.After(e.shown) {
			e.shown = t
			p.journals[f.ID] = e
		}
	}
	delete(p.missing, f.ID)
	delete(p.refusals, f.ID)
	s.published[f.ID] = true
	p.Metrics.CountPolls(substate.ProviderRestate, reconcile.OutcomeOK, 1)
	return nil
}

// publish puts one raw event on SUBSTATE_RAW.
func (p *Poller) publish(ctx context.Context, s *restateSweep, raw substate.RawEvent) error {
	if err := p.Publisher.PublishRaw(ctx, raw); err != nil {
		p.Metrics.CountPolls(substate.ProviderRestate, reconcile.OutcomePublishFailed, 1)
		return fmt.Errorf("restate poller: publish the row of %s: %w", raw.ID, err)
	}
	s.res.Published++
	return nil
}

// settleRefused decides about the ids the admin API refused alone: when
// other queries of the sweep succeeded, the admin API works and the ids are
// at fault, so their tenants get a dead letter; when none did, the admin
// API is failing and the sweep fails.
func (p *Poller) settleRefused(ctx context.Context, s *restateSweep, tenants map[string]string) error {
	for id, err := range s.refused {
		s.res.Polled++
		s.res.Failed++
		if !s.answered {
			p.Metrics.CountPolls(substate.ProviderRestate, substate.ErrorCode(err), 1)
			continue
		}
		p.Metrics.CountPolls(substate.ProviderRestate, substate.EINVALID, 1)
		if r, ok := p.refusals[id]; ok || len(p.refusals) < maxRefusals {
			r.count++
			r.until = p.Now().Add(p.refusedFor(r.count))
			p.refusals[id] = r
		}
		reason := fmt.Sprintf("the restate admin api refuses to query invocation %q while it answers for others: %v", id, err)
		if err := p.giveUp(ctx, id, tenants[id], substate.EINVALID, reason); err != nil {
			return err
		}
	}
	if len(s.refused) > 0 && !s.answered {
		for _, err := range s.refused {
			return err
		}
	}
	return nil
}

// giveUp reports, once while the view keeps it, an invocation the poller
// cannot poll: a warning, and a dead letter for its tenant with the reason.
func (p *Poller) giveUp(ctx context.Context, id, tenant, code, reason string) error {
	if p.missing[id] {
		return nil
	}
	p.logger().Warn(reason, "invocation", id, "tenant", tenant)
	if p.DeadLetters != nil {
		body, _ := json.Marshal(map[string]string{"tenantId": tenant, "provider": string(substate.ProviderRestate), "executionId": id})
		sum := sha256.Sum256([]byte(tenant + "\x00" + id))
		d := substate.DeadLetter{
			Stage: substate.StageReconcile, Reason: code + ": tenant " + tenant + ": " + reason,
			Subject: "restate-admin-poll", ID: "restate-poll-refused-" + hex.EncodeToString(sum[:12]), Body: body,
		}
		if err := p.DeadLetters.PublishDeadLetter(ctx, d); err != nil {
			return fmt.Errorf("restate poller: dead-letter invocation %q: %w", id, err)
		}
	}
	p.missing[id] = true
	return nil
}

// reportMissing logs an invocation the poller cannot report on, once.
func (p *Poller) reportMissing(id, why string) {
	if p.missing[id] {
		return
	}
	p.missing[id] = true
	p.logger().Warn(why, "invocation", id)
}

// forget drops what the poller remembers of invocations no longer tracked.
// The journals and raw ids of those the sweep published are kept: a row
// discovery just published reaches the view after the sweep listed it.
func (p *Poller) forget(tracked map[string]string, published map[string]bool) {
	for id := range p.missing {
		if _, ok := tracked[id]; !ok {
			delete(p.missing, id)
		}
	}
	for id := range p.refusals {
		if _, ok := tracked[id]; !ok {
			delete(p.refusals, id)
		}
	}
	for id := range p.journals {
		if _, ok := tracked[id]; !ok && !published[id] {
			delete(p.journals, id)
		}
	}
	for id := range p.inputs {
		if _, ok := tracked[id]; !ok && !published[id] {
			delete(p.inputs, id)
		}
	}
	for id := range p.sent {
		if _, ok := tracked[id]; !ok && !published[id] {
			delete(p.sent, id)
		}
	}
	for svc, e := range p.policies {
		if p.Now().Sub(e.at) >= policyTTL {
			delete(p.policies, svc)
		}
	}
}
