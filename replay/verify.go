package replay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
)

// Verify compares a running worker's view with a replay of SUBSTATE_EVENTS
// up to the sequence the view has applied, and checks the events against
// their raw evidence in SUBSTATE_RAW: what "substate verify" does.
type Verify struct {
	JS jetstream.JetStream
	// BatchSize is the events per transaction of the replay; 0 means
	// DefaultBatchSize.
	BatchSize int
	// Progress, when set, is called after every replayed batch.
	Progress func(Progress)
	// TenantRules are the worker's tenant resolution rules, to map the raw
	// evidence as it does; empty means the mapping's defaults.
	TenantRules mapping.TenantRules
	// TempDir is where the replayed view is built and removed again; ""
	// means the system's temporary directory.
	TempDir string
	// AcceptUnverified makes events of another mapping version, which
	// this binary cannot derive again exactly, no failure when the current
	// mapping agrees with what they say happened (see CheckUnverified).
	AcceptUnverified bool
	// Normalizer is the normalizer's durable consumer on SUBSTATE_RAW:
	// the raw messages it has acknowledged are the ones whose events the
	// search for gaps expects (see Gaps); "" means up to the last raw
	// message an event names.
	Normalizer string
}

// Comparison is how a live view compares with the replay of the events it
// has applied.
type Comparison struct {
	Seq     uint64        // the live view's applied sequence: the replay's last
	Tenants int           // tenants of the live view
	Replay  Progress      // what the replay read
	Took    time.Duration // how long the replay took
	Diffs   []TenantDiff  // tenants that differ, by id
	Moved   int           // tenants that changed while the live view was read: not compared
}

// VerifyResult is what a verification found.
type VerifyResult struct {
	Comparison
	Evidence *CheckResult // nil when the evidence was not checked
	Gaps     *GapResult   // nil when the evidence was not checked
}

// Failed reports whether the view differs from the replay, an event lacks
// its evidence, or raw evidence lacks its events.
func (r VerifyResult) Failed() bool {
	return len(r.Diffs) > 0 || (r.Evidence != nil && r.Evidence.Failed()) || (r.Gaps != nil && r.Gaps.Failed())
}

// Run reads the view of the worker c reaches, compares it with the replay
// and, when evidence is set and the view has applied anything, checks the
// evidence of the events it compared.
func (v *Verify) Run(ctx context.Context, c LiveClient, evidence bool) (VerifyResult, error) {
	live, err := ReadLive(ctx, c)
	if err != nil {
		return VerifyResult{}, err
	}
	cmp, err := v.Compare(ctx, live)
	if err != nil || !evidence || cmp.Seq == 0 {
		return VerifyResult{Comparison: cmp}, err
	}
	res, err := v.CheckEvidence(ctx, cmp.Seq)
	if err != nil {
		return VerifyResult{Comparison: cmp, Evidence: &res}, err
	}
	gaps, err := v.CheckGaps(ctx)
	return VerifyResult{Comparison: cmp, Evidence: &res, Gaps: &gaps}, err
}

// CheckGaps searches SUBSTATE_RAW for raw messages whose events
// SUBSTATE_EVENTS does not hold (see Gaps).
func (v *Verify) CheckGaps(ctx context.Context) (GapResult, error) {
	g := &Gaps{Reader: &Reader{JS: v.JS}, Mapper: mapping.New(mapping.Config{Tenants: v.TenantRules}), EventID: mapping.EventID}
	if v.Normalizer != "" {
		g.Normalized = func(ctx context.Context) (uint64, error) {
			c, err := v.JS.Consumer(ctx, substate.StreamRaw, v.Normalizer)
			if err != nil {
				return 0, fmt.Errorf("read the normalizer's position: %w", err)
			}
			return c.CachedInfo().AckFloor.Stream, nil
		}
	}
	return g.Run(ctx)
}

// Compare rebuilds the view up to the live view's position in a temporary
// file and compares the two, every field but updatedAt; the tenants that
// moved while the live view was read are left out.
func (v *Verify) Compare(ctx context.Context, live Live) (Comparison, error) {
	c := Comparison{Seq: live.To, Tenants: len(live.Tenants)}
	start := time.Now()
	replayed, p, err := v.replay(ctx, live.To)
	c.Replay, c.Took = p, time.Since(start)
	if err != nil {
		return c, err
	}
	moved, err := movedTenants(ctx, &Reader{JS: v.JS}, live.From, live.To)
	if err != nil {
		return c, err
	}
	c.Diffs, c.Moved = withoutMoved(Compare(live.Tenants, replayed), moved), len(moved)
	return c, nil
}

// CheckEvidence checks the events up to seq against SUBSTATE_RAW with the
// current mapping: an event it cannot derive again is a failure, unless it
// is of another mapping version and AcceptUnverified is set.
func (v *Verify) CheckEvidence(ctx context.Context, seq uint64) (CheckResult, error) {
	ch := &Checker{Reader: &Reader{JS: v.JS}, Mapper: mapping.New(mapping.Config{Tenants: v.TenantRules}),
		EventID: mapping.EventID, EventIDOf: mapping.EventIDOf, MappingVersion: mapping.Version, AcceptUnverified: v.AcceptUnverified}
	return ch.Run(ctx, Range{ToSeq: seq})
}

// replay rebuilds the view up to seq in a temporary file and reads it.
func (v *Verify) replay(ctx context.Context, seq uint64) (_ []substate.TenantView, _ Progress, err error) {
	if seq == 0 {
		return nil, Progress{}, nil // an empty view: nothing to replay
	}
	dir, err := os.MkdirTemp(v.TempDir, "substate-verify-")
	if err != nil {
		return nil, Progress{}, err
	}
	defer os.RemoveAll(dir)
	db, p, err := RebuildView(ctx, v.JS, filepath.Join(dir, "view.db"), Range{ToSeq: seq}, v.BatchSize, v.Progress)
	if err != nil {
		return nil, p, err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	views, err := AllViews(ctx, db)
	return views, p, err
}

// movedTenants returns the tenants of the events from+1 to to, which the
// live view applied while it was being read: their live views may be from
// either side of the window, so they cannot be compared.
func movedTenants(ctx context.Context, r *Reader, from, to uint64) (map[string]bool, error) {
	moved := map[string]bool{}
	if from == to {
		return moved, nil
	}
	for m, err := range r.Events(ctx, "", Range{FromSeq: from + 1, ToSeq: to}) {
		if err != nil {
			return nil, err
		}
		if m.Err == nil {
			moved[m.Event.Data.TenantID] = true
		}
	}
	return moved, nil
}

// withoutMoved leaves the tenants that moved out of diffs.
func withoutMoved(diffs []TenantDiff, moved map[string]bool) []TenantDiff {
	out := diffs[:0]
	for _, d := range diffs {
		if !moved[d.TenantID] {
			out = append(out, d)
		}
	}
	return out
}
