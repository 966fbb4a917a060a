package demorun

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/engine/demo"
	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/worker"
)

// summary prints the final view of the demo's tenants and the count of
// tenants by sub-state, and says whether each settled as expected (or,
// when the demo was interrupted, how many had not settled yet). Then it
// says what to try next: with stay, against the worker still running;
// otherwise, how to start it again on the demo's data.
func (d *demoRun) summary(ctx context.Context, interrupted, stay bool) {
	var views []substate.TenantView
	bySubState := map[substate.SubState]int{}
	wrong := 0
	for _, t := range slices.Sorted(maps.Keys(d.expect)) {
		v, err := d.w.View.Tenant(ctx, t)
		if err != nil {
			v = substate.TenantView{TenantID: t}
		}
		views = append(views, v)
		bySubState[v.WorkflowSubState]++
		if string(v.WorkflowSubState) != d.expect[t] {
			wrong++
		}
	}
	d.printf("\nTenant view after %s:\n\n", time.Since(d.start).Round(100*time.Millisecond))
	d.mu.Lock()
	_ = termtext.WriteTenants(d.out, views)
	d.mu.Unlock()
	d.printf("\nBy sub-state:")
	for _, s := range substate.SubStates {
		if n := bySubState[s]; n > 0 {
			d.printf("  %s %d", s, n)
		}
	}
	if n := bySubState[""]; n > 0 {
		d.printf("  (no status yet) %d", n)
	}
	d.printf("\n")
	switch {
	case wrong == 0:
		d.printf("Every tenant settled as expected.\n")
	case interrupted:
		d.printf("Interrupted before %s settled as expected.\n", termtext.Plural(wrong, "tenant"))
	default:
		d.printf("%s did not settle as expected.\n", termtext.Plural(wrong, "tenant"))
	}
	d.printf("(The view, the streams and the worker log, demo.log, are kept under %s.)\n", d.w.Flags.DataDir)
	retry := courierDownTenant()
	if _, ran := d.expect[retry]; !ran {
		retry = ""
	}
	if stay {
		d.printf("%s", stayHint(d.w.HTTP.URL(), retry))
		return
	}
	d.printf("%s", exploreHint(d.w.Flags, storyTenant(views), retry))
}

// The defaults of --http-addr and --nats-listen (struct tags cannot name
// constants).
const (
	defaultHTTPAddr   = "127.0.0.1:8080"
	defaultNATSListen = "127.0.0.1:4222"
)

// storyTenant picks a tenant worth an audit: the first with retries, else
// the first that failed, else the first.
func storyTenant(views []substate.TenantView) string {
	if i := slices.IndexFunc(views, func(v substate.TenantView) bool { return v.WorkflowRetryCount > 0 }); i >= 0 {
		return views[i].TenantID
	}
	if i := slices.IndexFunc(views, func(v substate.TenantView) bool { return v.WorkflowSubState == substate.StateFailed }); i >= 0 {
		return views[i].TenantID
	}
	if len(views) > 0 {
		return views[0].TenantID
	}
	return "TENANT"
}

// exploreHint says how to look at the demo's data once it has ended: the
// worker is stopped with the demo, so it is started again on the same data
// and addresses, and the commands are given the addresses that are not
// their defaults. retry, when not empty, is the tenant whose courier was
// down: its retry needs the demo's own task services, which remember that
// the courier already failed once, so it is shown with --stay.
func exploreHint(f worker.Flags, tenant, retry string) string {
	run := "substate run --data-dir " + shellQuote(f.DataDir)
	var server, nats string
	if f.HTTPAddr != defaultHTTPAddr {
		run += " --http-addr " + f.HTTPAddr
		server = " --server http://" + f.HTTPAddr
	}
	switch {
	case f.NATSURL != "":
		run += " --nats-url " + f.NATSURL
		nats = " --nats-url " + f.NATSURL
	case f.NATSListen != defaultNATSListen:
		run += " --nats-listen " + f.NATSListen
		nats = " --nats-url nats://" + f.NATSListen
	}
	if f.NATSURL == "" && filepath.Clean(f.DataDir) != "data" {
		nats += " --data-dir " + shellQuote(f.DataDir) // where the embedded server's credentials are
	}
	hint := "\nTo look around, start the worker again on the demo's data, then ask it from another terminal:\n" +
		"  " + run + "\n" +
		"  substate tenants list --has-error" + server + "\n" +
		"  substate audit --tenant " + shellQuote(tenant) + nats + "\n" +
		"  substate verify" + server + nats + "\n"
	if retry != "" {
		hint += "To retry the order that failed because the courier was down, run the demo with --stay and, from another terminal:\n" +
			"  " + retryCommand(retry, server) + "\n"
	}
	return hint
}

// stayHint says what to try against the demo's worker, still running at
// url: retry, when not empty, is the tenant whose courier was down.
func stayHint(url, retry string) string {
	server := ""
	if url != "http://"+defaultHTTPAddr {
		server = " --server " + url
	}
	hint := "\nThe console stays at " + url + "/ until you press Ctrl-C; from another terminal, try:\n" +
		"  substate tenants list --sub-state failed" + server + "\n"
	if retry != "" {
		hint += "  substate executions describe " + shellQuote(retry) + server + "\n" +
			"  " + retryCommand(retry, server) + "\n"
	}
	return hint
}

// retryCommand retries the order of tenant whose courier was down; server
// is the --server flag, or empty for the default.
func retryCommand(tenant, server string) string {
	return "substate executions retry " + shellQuote(tenant) + ` --reason "the courier is back"` + server
}

// courierDownTenant is the tenant of the demo's order whose courier was
// down (demo.CourierDownOrder).
func courierDownTenant() string {
	for _, s := range demo.Scenarios {
		if strings.Contains(string(s.Input), demo.CourierDownOrder) {
			return s.TenantID
		}
	}
	return ""
}

// shellQuote quotes s for a POSIX shell when it holds anything but letters,
// digits and -_./:@.
func shellQuote(s string) string {
	safe := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@", r))
	}) < 0
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
