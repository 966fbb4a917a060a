package consumers

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/substatehq/substate"
)

// tenantsReadTimeout bounds the read of the tenant counts at a scrape.
const tenantsReadTimeout = 2 * time.Second

var tenantsDesc = prometheus.NewDesc("substate_tenants",
	"Tenants in the view by sub-state and provider, from the counters the view keeps.",
	[]string{"sub_state", "provider"}, nil)

// TenantsCollector exports substate_tenants{sub_state,provider} from
// counters the view keeps in the transactions that change it (see
// state.DB.TenantCounts): exact, one short read per scrape, whatever the
// number of tenants. Every sub-state and provider is exported, at 0
// when none is there, so that a query over them never finds a series
// missing. No tenant id is a label.
type TenantsCollector struct {
	Counts func(ctx context.Context) ([]substate.TenantCount, error)
}

// Describe sends the one metric's description.
func (c *TenantsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- tenantsDesc }

// Collect reads the counts and sends one gauge per sub-state and
// provider. A read that fails sends nothing: the scrape shows the metric
// absent rather than wrong.
func (c *TenantsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), tenantsReadTimeout)
	defer cancel()
	counts, err := c.Counts(ctx)
	if err != nil {
		return
	}
	for _, n := range counts {
		ch <- prometheus.MustNewConstMetric(tenantsDesc, prometheus.GaugeValue, float64(n.Count), string(n.SubState), string(n.Provider))
	}
}
