package consumers

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/substatehq/substate"
)

// Labels of substate_tenants_stuck that stand for several workflow types.
const (
	// OtherWorkflowTypes counts the stuck tenants of the workflow types
	// past StuckCollector.MaxTypes.
	OtherWorkflowTypes = "other"
	// NoWorkflowType counts the stuck tenants whose events named none.
	NoWorkflowType = "none"
)

// DefaultStuckMetricTypes is StuckCollector's MaxTypes when it is 0.
const DefaultStuckMetricTypes = 50

// stuckReadTimeout bounds the read of the stuck counts at a scrape.
const stuckReadTimeout = 2 * time.Second

var stuckDesc = prometheus.NewDesc("substate_tenants_stuck",
	"Tenants whose deadline passed with no change in their view, by provider, workflow type (the types with the most stuck tenants; the rest as \"other\") and sub-state.",
	[]string{"provider", "workflow_type", "sub_state"}, nil)

// StuckCollector exports substate_tenants_stuck from counters the view
// keeps (one read per scrape, whatever the number of tenants). No tenant
// id is a label, and the workflow type's values are bounded: the MaxTypes
// workflow types with the most stuck tenants have a label value of their
// own, the others are summed under OtherWorkflowTypes, so a fleet of
// thousands of workflow types costs at most MaxTypes+2 values of it.
type StuckCollector struct {
	Counts   func(ctx context.Context) ([]substate.StuckCount, error)
	MaxTypes int // 0 means DefaultStuckMetricTypes
}

// Describe sends the one metric's description.
func (c *StuckCollector) Describe(ch chan<- *prometheus.Desc) { ch <- stuckDesc }

// Collect reads the counts and sends a gauge per provider, workflow type
// and sub-state that has a stuck tenant. A read that fails sends nothing
// (the scrape shows the metric absent rather than wrong).
func (c *StuckCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stuckReadTimeout)
	defer cancel()
	counts, err := c.Counts(ctx)
	if err != nil {
		return
	}
	for k, n := range BoundStuck(counts, cmp.Or(c.MaxTypes, DefaultStuckMetricTypes)) {
		ch <- prometheus.MustNewConstMetric(stuckDesc, prometheus.GaugeValue, float64(n), string(k.Provider), k.WorkflowType, string(k.SubState))
	}
}

// BoundStuck sums counts by provider, workflow type and sub-state, with
// the workflow types past the max most stuck (ties by name) summed under
// OtherWorkflowTypes and the empty one as NoWorkflowType.
func BoundStuck(counts []substate.StuckCount, maxTypes int) map[substate.StuckCount]int64 {
	perType := map[string]int64{}
	for _, c := range counts {
		perType[c.WorkflowType] += c.Count
	}
	types := slices.SortedFunc(maps.Keys(perType), func(a, b string) int {
		return cmp.Or(cmp.Compare(perType[b], perType[a]), strings.Compare(a, b))
	})
	kept := make(map[string]bool, maxTypes)
	for _, t := range types[:min(maxTypes, len(types))] {
		kept[t] = true
	}
	out := map[substate.StuckCount]int64{}
	for _, c := range counts {
		wt := c.WorkflowType
		switch {
		case !kept[wt]:
			wt = OtherWorkflowTypes
		case wt == "":
			wt = NoWorkflowType
		}
		out[substate.StuckCount{Provider: c.Provider, WorkflowType: wt, SubState: c.SubState}] += c.Count
	}
	return out
}
