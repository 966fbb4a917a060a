package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestFleetControls drives fleet jobs through the substate binary as an
// operator does, against a worker process whose engine lane is slowed to
// about one call a second (--action-limit) so that a job stays running
// while it is controlled: "executions stop --filter" of failed tenants
// follows its job to the end (each refused, exit 0); a retry job created
// with --detach is paused ("actions get" shows it paused, and no member
// is acted on while it is), resumed, and followed by "actions watch" to
// its end (exit 0, every member done); a restart job is cancelled, and
// "actions watch" of it ends at once with exit 1 while its report holds
// exactly the members acted on before the cancel.
func TestFleetControls(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	dir, httpAddr, natsAddr := t.TempDir(), workertest.FreeAddr(t), workertest.FreeAddr(t)
	p := startProcess(t, dir, httpAddr, natsAddr, "--log-level", "warn", "--action-limit", "engine=1", "--action-limit", "engine/engine=1/1")
	f := &fleet{charges: map[string]map[string]int{}, invs: map[string]string{}}
	f.serveCharges(t, p)
	nc := p.busAs(t, bus.Worker)
	var tenants []string
	for _, set := range []string{"a", "b", "c"} {
		for i := range 3 {
			tenant := fmt.Sprintf("ctl-%s-%d", set, i)
			tenants = append(tenants, tenant)
			if _, err := engine.RequestStart(context.Background(), nc, engine.StartCommand{Definition: fleetWorkflow, Name: "run-" + tenant,
				TenantID: tenant, Input: json.RawMessage(`{"tenantId":"` + tenant + `"}`)}); err != nil {
				t.Fatalf("start %s: %v", tenant, err)
			}
		}
	}
	workertest.EventuallyWithin(t, time.Minute, func() string {
		code, out, errOut := runCLI(t, "tenants", "list", "--tenant-prefix", "ctl-", "--sub-state", "failed", "--server", p.httpURL, "-o", "json")
		var page substate.TenantPage
		if code != 0 || json.Unmarshal([]byte(out), &page) != nil {
			return fmt.Sprintf("tenants list: %d %s%s", code, out, errOut)
		}
		if len(page.Tenants) != len(tenants) {
			return fmt.Sprintf("%d of %d tenants failed", len(page.Tenants), len(tenants))
		}
		return ""
	})
	f.fix(t)
	server := []string{"--server", p.httpURL}
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runBinary(t, append(args, server...)...)
	}
	jobOf := func(what string, code int, out, errOut string) substate.Job {
		t.Helper()
		var j substate.Job
		if err := json.Unmarshal([]byte(out), &j); err != nil || j.ID == "" {
			t.Fatalf("%s: exit %d, no job in the output (%v)\n%s%s", what, code, err, out, errOut)
		}
		return j
	}
	get := func(id string) substate.Job {
		t.Helper()
		code, out, errOut := cli("actions", "get", id, "-o", "json")
		if code != 0 {
			t.Fatalf("actions get %s: exit %d\n%s%s", id, code, out, errOut)
		}
		return jobOf("actions get", code, out, errOut)
	}

	// A stop of failed executions: every member refused, without a
	// provider call; the command follows the job to its end.
	code, out, errOut := cli("executions", "stop", "--filter", "tenantPrefix=ctl-c-,subState=failed", "--reason", "clean up", "-o", "json")
	if j := jobOf("executions stop --filter", code, out, errOut); code != 0 || j.State != substate.JobDone || j.Total != 3 || j.Progress.Refused != 3 {
		t.Fatalf("executions stop --filter: exit %d, %s %+v, want done with 3 refused\n%s", code, j.State, j.Progress, errOut)
	}

	// A retry, detached, paused while it runs.
	code, out, errOut = cli("executions", "retry", "--filter", "tenantPrefix=ctl-a-,subState=failed", "--reason", "provider back", "--detach", "-o", "json")
	retry := jobOf("executions retry --filter --detach", code, out, errOut)
	if code != 0 || retry.Total != 3 {
		t.Fatalf("executions retry --filter --detach: exit %d, %d members, want 3\n%s%s", code, retry.Total, out, errOut)
	}
	code, out, errOut = cli("actions", "pause", retry.ID)
	if code != 0 || !strings.Contains(out, "job "+retry.ID+": pause asked") || !strings.Contains(out, "paused") {
		t.Fatalf("actions pause: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli("actions", "get", retry.ID)
	if code != 0 || !strings.Contains(out, "paused") || !strings.Contains(out, "tenantPrefix=ctl-a-") {
		t.Fatalf("actions get, as a table: exit %d, want the state paused and the filter\n%s%s", code, out, errOut)
	}
	// The member under way when it was paused (one at most: the lane acts
	// on one at a time) ends; then nothing moves, where the lane would
	// finish a member every three seconds or so.
	atPause := get(retry.ID).Progress.Outcomes()
	settled := time.Now().Add(6 * time.Second)
	for time.Now().Before(settled) && get(retry.ID).Progress.Outcomes() == atPause {
		time.Sleep(200 * time.Millisecond)
	}
	paused := get(retry.ID)
	time.Sleep(4 * time.Second)
	if j := get(retry.ID); j.State != substate.JobPaused || paused.Progress.Outcomes() > atPause+1 || j.Progress.Outcomes() != paused.Progress.Outcomes() ||
		j.Progress.Outcomes() == j.Total {
		t.Fatalf("paused at %d outcomes: %d, then %s with %d of %d: a paused job acted on members",
			atPause, paused.Progress.Outcomes(), j.State, j.Progress.Outcomes(), j.Total)
	}

	// A restart, cancelled at once: the report says what was done.
	code, out, errOut = cli("executions", "restart", "--filter", "tenantPrefix=ctl-b-", "--reason", "rerun", "--detach", "-o", "json")
	restart := jobOf("executions restart --filter --detach", code, out, errOut)
	if code != 0 || restart.Total != 3 {
		t.Fatalf("executions restart --filter --detach: exit %d, %d members\n%s%s", code, restart.Total, out, errOut)
	}
	code, out, errOut = cli("actions", "cancel", restart.ID)
	if code != 0 || !strings.Contains(out, "job "+restart.ID+": cancel asked") {
		t.Fatalf("actions cancel: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli("actions", "watch", restart.ID, "-o", "json")
	cancelled := jobOf("actions watch of the cancelled job", code, out, errOut)
	if code != 1 || cancelled.State != substate.JobCancelled || cancelled.Progress.Remaining == 0 ||
		cancelled.Progress.Outcomes()+cancelled.Progress.Remaining != cancelled.Total {
		t.Fatalf("actions watch of a cancelled job: exit %d (want 1), %s %+v\n%s", code, cancelled.State, cancelled.Progress, errOut)
	}
	code, out, errOut = cli("actions", "report", restart.ID, "-o", "json")
	var rep struct{ Members []substate.MemberOutcome }
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("actions report: exit %d\n%s%s", code, out, errOut)
	}
	outcomes := map[string]int{}
	for _, m := range rep.Members {
		outcomes[m.Outcome]++
	}
	if p := cancelled.Progress; len(rep.Members) != p.Outcomes() || outcomes["done"] != p.Done || outcomes["pending"] != p.Pending ||
		outcomes["refused"] != p.Refused || outcomes["unknown"] != p.Unknown || outcomes["skipped"] != p.Skipped {
		t.Errorf("the cancelled job's report %v (%d members), its progress %+v", outcomes, len(rep.Members), p)
	}
	code, out, errOut = cli("actions", "resume", restart.ID)
	if code == 0 || !strings.Contains(errOut, "409") && !strings.Contains(strings.ToLower(errOut), "ended") {
		t.Errorf("resume of a cancelled job: exit %d, want a refusal\n%s%s", code, out, errOut)
	}

	// The retry resumed, followed to its end.
	code, out, errOut = cli("actions", "resume", retry.ID)
	if code != 0 || !strings.Contains(out, "job "+retry.ID+": resume asked") {
		t.Fatalf("actions resume: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli("actions", "watch", retry.ID, "-o", "json")
	if j := jobOf("actions watch", code, out, errOut); code != 0 || j.State != substate.JobDone || j.Progress.Done != 3 {
		t.Fatalf("actions watch: exit %d, %s %+v, want done with 3 done\n%s", code, j.State, j.Progress, errOut)
	}
	code, out, errOut = cli("actions", "watch", retry.ID)
	if code != 0 || !strings.Contains(out, "job "+retry.ID+" done: retry of 3 members; done 3") {
		t.Errorf("actions watch of an ended job, as text: exit %d\n%s%s", code, out, errOut)
	}
}
