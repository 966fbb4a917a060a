package substate

import (
	"context"
	"errors"
	"iter"
	"time"
)

// ActiveLister lists the tenants whose execution has not ended (running,
// waiting, backing-off or error) and whose last event is older than
// lastEventBefore: the runs a reconciler should ask their provider about.
// An error is yielded once, last.
type ActiveLister interface {
	Active(ctx context.Context, lastEventBefore time.Time) iter.Seq2[TenantView, error]
}

// TenantQuerier reads the tenant view: one tenant, or a page of those a
// filter selects (the read API's queries). The reconciler lists failed
// tenants with it.
type TenantQuerier interface {
	Tenant(ctx context.Context, id string) (TenantView, error)
	Tenants(ctx context.Context, f TenantFilter) (TenantPage, error)
}

// StatusPoller reads the current status of one execution from its provider
// and returns it as raw evidence, ready to publish on SUBSTATE_RAW and
// mapped by the normalizer like any other raw event. withHistory asks for
// the detail that costs extra calls (Step Functions: the recent execution
// history, which shows retries and backing-off); a provider without such
// detail ignores it. The raw event's id is derived from what the provider
// returned, so polling an unchanged execution twice yields the same id.
// An execution the provider does not know is an ENOTFOUND error.
type StatusPoller interface {
	Poll(ctx context.Context, executionID string, withHistory bool) (RawEvent, error)
}

// RetryAfter returns how long err asks its caller to wait before the next
// call to the same provider: a throttled provider backing off says so with
// a RetryAfter() time.Duration method somewhere in the error's chain. It is
// 0 when err does not say.
func RetryAfter(err error) time.Duration {
	var r interface{ RetryAfter() time.Duration }
	if errors.As(err, &r) {
		return max(r.RetryAfter(), 0)
	}
	return 0
}
