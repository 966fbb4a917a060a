package restate

import (
	"context"
	"strconv"
	"time"
)

// discoveryOverlap is how far before the start of the last discovery the
// next one reads again: a row may become visible after rows with a later
// (modified_at, id) were read (another partition, the same millisecond),
// but not later than this after its modified_at. So a discovery goes on
// from its cursor, or from discoveryOverlap before the last discovery
// started when the cursor is later than that: the rows of those 2 s are
// read twice, once, and not on every sweep. Rows read twice are
// deduplicated by their raw event id. The overlap is measured on this
// process's clock against Restate's modified_at: a Restate clock more than
// the overlap behind this one may leave a late row to the polls by id.
const discoveryOverlap = 2 * time.Second

// discover publishes the Services' rows changed since the cursor, page by
// page. The first sweep reads those changed in the last Lookback and every
// invocation that has not completed, however old.
func (p *Poller) discover(ctx context.Context, s *restateSweep, now time.Time) error {
	if len(p.Services) == 0 {
		return nil
	}
	var cur discoveryCursor
	var since time.Time
	if p.cursor != nil {
		cur = *p.cursor
		if again := p.discovered.Add(-discoveryOverlap); !cur.ModifiedAt.Before(again) {
			cur = discoveryCursor{ModifiedAt: again}
		}
	} else {
		since = now.Add(-p.Lookback)
		cur.ModifiedAt = time.UnixMilli(0).UTC()
	}
	for {
		if err := p.pacer.Wait(ctx, 1); err != nil {
			return err
		}
		rows, err := p.Admin.Query(ctx, discoveryQuery(p.Columns, p.Services, cur, since, p.PageSize))
		if err != nil {
			return err
		}
		s.answered = true
		polled := polledRows(rows)
		p.readInputs(ctx, polled)
		for _, row := range polled {
			if err := p.publishRow(ctx, s, row); err != nil {
				return err
			}
			cur = advance(cur, row)
		}
		if len(rows) < p.PageSize {
			switch {
			case cur.ModifiedAt.Before(since):
				cur = discoveryCursor{ModifiedAt: since}
			case p.cursor != nil && cur.ModifiedAt.Before(p.cursor.ModifiedAt):
				cur = *p.cursor // the overlap found nothing newer
			}
			p.cursor, p.discovered = &cur, now
			return nil
		}
	}
}

// advance moves the cursor to a row read in (modified_at, id) order; a row
// whose time cannot be read leaves it where it is.
func advance(cur discoveryCursor, row polledRow) discoveryCursor {
	if row.err != nil {
		return cur
	}
	f := row.facts
	t, err := parseRestateTime(f.ModifiedAt)
	if err != nil || t.Before(cur.ModifiedAt) {
		return cur
	}
	return discoveryCursor{ModifiedAt: t, ID: f.ID}
}

// parseRestateTime reads a modified_at as the admin API writes it: RFC 3339
// text, or epoch milliseconds.
func parseRestateTime(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms).UTC(), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Parse(time.RFC3339Nano, s)
}
