package replay

import (
	"context"

	"github.com/substatehq/substate"
)

// unlinkedBatch is how many unlinked events one search of SUBSTATE_RAW
// looks for.
const unlinkedBatch = 1000

// checkUnlinked checks the events published before events named their raw
// message: Evidence finds the raw message whose event id they have.
func (c *Checker) checkUnlinked(ctx context.Context, events []Event, b rawBounds, res *CheckResult) error {
	ev := &Evidence{Reader: c.Reader, EventID: c.EventID, Lookback: c.Lookback}
	for len(events) > 0 {
		batch := events[:min(len(events), unlinkedBatch)]
		events = events[len(batch):]
		lookups := make([]Lookup, len(batch))
		for i, e := range batch {
			lookups[i] = Lookup{EventID: e.Event.ID, StoredAt: e.Stored}
		}
		found, err := ev.Find(ctx, lookups)
		if err != nil {
			return err
		}
		for i, e := range batch {
			f, err := c.checkFound(ctx, e, found[i], b)
			if err != nil {
				return err
			}
			c.record(res, f)
		}
	}
	return nil
}

// checkFound checks an unlinked event against the raw message a search
// found for it, or classifies it when none was found.
func (c *Checker) checkFound(ctx context.Context, e Event, found substate.Evidence, b rawBounds) (Finding, error) {
	f := Finding{Seq: e.Seq, EventID: e.Event.ID, TenantID: e.Event.Data.TenantID}
	if found.Missing != "" {
		if c.expired(e, b) {
			return f.is(CheckExpired, "no raw link, and stored when SUBSTATE_RAW's oldest messages were already removed"), nil
		}
		return f.is(CheckMissing, "no raw link and no raw message with this event's id"), nil
	}
	f.Raw = substate.RawRef{Seq: found.Seq, ID: found.ID}
	m, err := c.Reader.Get(ctx, substate.StreamRaw, found.Seq)
	if substate.ErrorCode(err) == substate.ENOTFOUND {
		return c.gone(f, e, b), nil
	} else if err != nil {
		return f, err
	}
	return c.compare(f, e, RawEventOf(m)), nil
}
