package e2e_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/substatehq/substate/httpapi/console"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// TestConsoleReconcilerSweep: the console's health says when the
// reconciler last finished a sweep, here the Restate poller's against an
// admin API with no invocations.
func TestConsoleReconcilerSweep(t *testing.T) {
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"rows":[]}`)
	}))
	defer admin.Close()
	start := time.Now()
	w := workertest.Start(t, func(f *worker.Flags) { f.RestateAdminURL, f.RestatePollEvery = admin.URL, 50*time.Millisecond })
	workertest.Eventually(t, func() string {
		var o console.Overview
		if code := workertest.GetJSON(t, w.HTTP.URL()+"/console/api/overview", &o); code != 200 || o.Health.Reconciler == nil || o.Health.Reconciler.Last == nil {
			return fmt.Sprintf("HTTP %d, reconciler %+v", code, o.Health.Reconciler)
		}
		if o.Health.Reconciler.Last.Before(start) {
			return fmt.Sprintf("last sweep %v, before the worker started", o.Health.Reconciler.Last)
		}
		return ""
	})
}
