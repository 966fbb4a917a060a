package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/engine"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/restatetest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// FleetTenantsEnv sets how many failed tenants TestFleetRetry retries
// (600 by default; the size is 10000). A tenth of them, at most
// 300, run on the real Restate server; the rest are split between Step
// Functions (awstest) and the engine.
const FleetTenantsEnv = "SUBSTATE_FLEET_TENANTS"

// fleetWorkflow calls a task that fails while the test keeps it broken.
const fleetWorkflow = "name: fleet\nversion: \"1\"\nstartAt: call\nstates:\n  call: {type: Task, resource: fleet.charge, next: done}\n  done: {type: Success}\n"

// fleetSizes are the tenants per provider.
type fleetSizes struct{ engine, sfn, restate int }

func (s fleetSizes) total() int { return s.engine + s.sfn + s.restate }

// patience is how long a phase of the test may take at this size: its
// base, and 50 ms more per tenant (a slow machine's bound, not a measure).
func (s fleetSizes) patience(base time.Duration) time.Duration {
	return base + time.Duration(s.total())*50*time.Millisecond
}

func fleetSize(t *testing.T) fleetSizes {
	n := 600
	if v := os.Getenv(FleetTenantsEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 30 {
			t.Fatalf("%s=%q: want a number of tenants, at least 30", FleetTenantsEnv, v)
		}
	}
	r := min(max(n/10, 10), 300)
	return fleetSizes{restate: r, sfn: (n - r) / 2, engine: n - r - (n-r)/2}
}

// fleet is the providers of TestFleetRetry and what they saw.
type fleet struct {
	sizes   fleetSizes
	aws     *awstest.Server
	machine string
	restate *restatetest.Server
	invs    map[string]string // Restate invocation id by tenant
	mu      sync.Mutex
	charges map[string]map[string]int // engine task calls by tenant and idempotency key
	fixed   bool
}

// TestFleetRetry is the fleet story as a new user runs it: failed tenants
// on the three providers (the engine's executions run for real, Step
// Functions is awstest with its quotas switched on, Restate the real
// server) are retried by one filtered CLI command. The dry run's count is
// what the job acts on; Step Functions throttles and the job absorbs it;
// the worker is killed with SIGKILL mid-job and the job resumes on its
// restart; no execution is acted on twice (awstest's call log and redrive
// counts, the engine task's calls, Restate's attempts); the audit stream's
// outcomes equal the job's report. The size is FleetTenantsEnv.
func TestFleetRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills worker processes, and a Restate server")
	}
	f := &fleet{sizes: fleetSize(t), charges: map[string]map[string]int{}, invs: map[string]string{}}
	f.aws = awstest.New(t)
	awstest.Env(t, f.aws.URL, "us-east-1")
	f.machine = f.aws.AddStateMachine("provision", `{"StartAt":"Charge","States":{"Charge":{"Type":"Pass","End":true}}}`, "arn:aws:iam::123456789012:role/sfn")
	f.restate = restatetest.Start(t)
	dir, httpAddr, natsAddr := t.TempDir(), workertest.FreeAddr(t), workertest.FreeAddr(t)
	flags := []string{"--log-level", "warn", "--restate-admin-url", f.restate.AdminURL, "--restate-services", "Provision",
		"--restate-poll-interval", "1s", "--reconcile-interval", "5s",
		"--action-limit", "stepfunctions=32", "--action-limit", "stepfunctions/DescribeExecution=400/1000",
		"--action-limit", "stepfunctions/GetExecutionHistory=400/1000", "--action-limit", "stepfunctions/RedriveExecution=400/1000",
		"--action-limit", "engine=16", "--action-limit", "engine/engine=500/1000"}
	p := startProcess(t, dir, httpAddr, natsAddr, flags...)
	f.serveCharges(t, p)
	f.failAll(t, p)
	t.Logf("%d tenants failed: %+v", f.sizes.total(), f.sizes)
	url := p.httpURL
	filter := "tenantPrefix=fleet-,hasError=true"

	code, out, errOut := runCLI(t, "executions", "retry", "--filter", filter, "--dry-run", "--server", url, "-o", "json")
	var pv substate.JobPreview
	if code != 0 || json.Unmarshal([]byte(out), &pv) != nil || pv.Total != f.sizes.total() || pv.WouldAct != pv.Total {
		t.Fatalf("dry run: exit %d, total %d of %d\n%s%s", code, pv.Total, f.sizes.total(), out, errOut)
	}
	t.Logf("dry run: %d tenants, %+v, %.0f s estimated", pv.Total, pv.Lanes, pv.Seconds)
	f.fix(t)
	// Step Functions' quotas, far below what the lane allows itself, and
	// the first redrives throttled whatever the pace of this machine.
	f.aws.Quota("DescribeExecution", 50, 250)
	f.aws.Quota("GetExecutionHistory", 50, 250)
	f.aws.Quota("RedriveExecution", 20, 100)
	f.aws.Throttle("RedriveExecution", 10)

	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := runCLIFor(t, f.sizes.patience(20*time.Minute), "executions", "retry", "--filter", filter, "--reason", "payment provider back",
			"--expect", strconv.Itoa(pv.Total), "--server", url, "-o", "json")
		done <- result{code, out, errOut}
	}()
	id, killedAt := f.killMidJob(t, p, pv.Total)
	t.Logf("job %s: worker killed at %d outcomes", id, killedAt)
	p = startProcess(t, dir, httpAddr, natsAddr, flags...)
	var r result
	select {
	case r = <-done:
	case <-time.After(f.sizes.patience(20 * time.Minute)):
		t.Fatalf("the retry command did not end within %s", f.sizes.patience(20*time.Minute))
	}
	var j substate.Job
	if r.code != 0 || json.Unmarshal([]byte(r.out), &j) != nil || j.ID != id || j.State != substate.JobDone {
		t.Fatalf("retry --filter: exit %d\n%s%s", r.code, r.out, r.errOut)
	}
	t.Logf("job %s: killed at %d outcomes, ended %+v; the command said: %s", id, killedAt, j.Progress, strings.TrimSpace(r.errOut))
	if j.Total != pv.Total || j.Progress.Done != pv.Total {
		t.Errorf("the job acted on %d (%d done) of the %d the dry run counted: %+v", j.Total, j.Progress.Done, pv.Total, j.Reasons)
	}
	f.checkReportIsAudit(t, p, url, id)
	f.checkActedOnce(t)
}

// serveCharges answers the engine's task, failing until the fleet is
// fixed, and counts the calls of each tenant.
func (f *fleet) serveCharges(t *testing.T, p *process) {
	t.Helper()
	svc, err := micro.AddService(p.busAs(t, bus.Tasks), micro.Config{Name: "fleet", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	err = svc.AddEndpoint("charge", micro.HandlerFunc(func(req micro.Request) {
		var in struct {
			TenantID string `json:"tenantId"`
		}
		_ = json.Unmarshal(req.Data(), &in)
		f.mu.Lock()
		if f.charges[in.TenantID] == nil {
			f.charges[in.TenantID] = map[string]int{}
		}
		f.charges[in.TenantID][req.Headers().Get(substate.HeaderIdempotencyKey)]++
		fixed := f.fixed
		f.mu.Unlock()
		if !fixed {
			_ = req.Error("Unavailable", "payment provider returned HTTP 503", nil)
			return
		}
		_ = req.Respond(req.Data())
	}), micro.WithEndpointSubject(substate.TaskSubject("fleet", "charge")))
	if err != nil {
		t.Fatal(err)
	}
}

// failAll makes every tenant fail on its provider and waits until the
// view shows them all where they stay until retried: the engine's and
// Step Functions' executions failed, the Restate invocations paused
// (error) once their retry policy gave up. A tenant still backing off
// when the set is frozen would change before its turn, and be skipped.
func (f *fleet) failAll(t *testing.T, p *process) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() { f.failEngine(t, p) })
	wg.Go(func() { f.failSFN(t, p.httpURL) })
	wg.Go(func() { f.failRestate(t) })
	wg.Wait()
	want := map[string]int64{string(substate.StateFailed): int64(f.sizes.engine + f.sizes.sfn), string(substate.StateError): int64(f.sizes.restate)}
	workertest.EventuallyWithin(t, f.sizes.patience(5*time.Minute), func() string {
		code, out, errOut := runCLI(t, "tenants", "groups", "--by", "subState", "--tenant-prefix", "fleet-", "--has-error", "--server", p.httpURL, "-o", "json")
		var g substate.GroupPage
		if code != 0 || json.Unmarshal([]byte(out), &g) != nil {
			return fmt.Sprintf("groups: %d %s%s", code, out, errOut)
		}
		got := map[string]int64{}
		for _, gr := range g.Groups {
			got[gr.Value] = gr.Count
		}
		if !maps.Equal(got, want) {
			return fmt.Sprintf("tenants by sub-state %v, want %v", got, want)
		}
		return ""
	})
}

// failEngine starts the engine's executions; each fails at its task.
func (f *fleet) failEngine(t *testing.T, p *process) {
	nc := p.busAs(t, bus.Worker)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < f.sizes.engine; i += 8 {
				tenant := fmt.Sprintf("fleet-e-%05d", i)
				if _, err := engine.RequestStart(ctx, nc, engine.StartCommand{Definition: fleetWorkflow, Name: "run-" + tenant,
					TenantID: tenant, Input: json.RawMessage(`{"tenantId":"` + tenant + `"}`)}); err != nil {
					t.Errorf("start %s: %v", tenant, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// failSFN adds failed Step Functions executions and delivers their
// status changes as EventBridge does, a hundred a request.
func (f *fleet) failSFN(t *testing.T, url string) {
	now := time.Now().UTC()
	var batch []json.RawMessage
	for i := range f.sizes.sfn {
		tenant := fmt.Sprintf("fleet-s-%05d", i)
		name := "run-" + tenant
		f.aws.AddExecution(awstest.Execution{ARN: awstest.ExecutionARN(f.machine, name), StateMachineARN: f.machine, Name: name,
			Status: "FAILED", Input: `{"tenantId":"` + tenant + `"}`, StartDate: now.Add(-time.Minute), StopDate: now,
			Error: "ProvisioningFailed", Cause: "payment provider returned HTTP 503"})
		batch = append(batch, fleetSFNEvent(f.machine, name, tenant, now))
		if len(batch) == 100 || i == f.sizes.sfn-1 {
			body, _ := json.Marshal(batch)
			if code := workertest.Post(t, url+"/v1/ingest/eventbridge", body, map[string]string{"Content-Type": "application/json"}); code != http.StatusAccepted {
				t.Errorf("ingest: %d", code)
				return
			}
			batch = batch[:0]
		}
	}
}

// fleetSFNEvent is the EventBridge event of a failed execution.
func fleetSFNEvent(machine, name, tenant string, at time.Time) json.RawMessage {
	arn := awstest.ExecutionARN(machine, name)
	cause, _ := json.Marshal(map[string]string{"errorMessage": "payment provider returned HTTP 503", "errorType": "ProvisioningFailed"})
	b, _ := json.Marshal(map[string]any{
		"version": "0", "id": "ev-" + name, "detail-type": "Step Functions Execution Status Change", "source": "aws.states",
		"account": awstest.AccountID, "time": at.Format(time.RFC3339), "region": "us-east-1", "resources": []string{arn},
		"detail": map[string]any{"executionArn": arn, "stateMachineArn": machine, "name": name, "status": "FAILED",
			"startDate": at.Add(-time.Minute).UnixMilli(), "stopDate": at.UnixMilli(), "input": `{"tenantId":"` + tenant + `"}`,
			"error": "ProvisioningFailed", "cause": string(cause), "redriveCount": 0},
	})
	return b
}

// failRestate sends invocations that fail until their gate opens and are
// paused by their retry policy after three attempts.
func (f *fleet) failRestate(t *testing.T) {
	for i := range f.sizes.restate {
		tenant := fmt.Sprintf("fleet-r-%05d", i)
		id := f.restate.Send(t, "Provision", tenant, "stuck", nil, 0)
		f.mu.Lock()
		f.invs[tenant] = id
		f.mu.Unlock()
	}
}

// fix ends every provider's fault: the engine's task answers, the Restate
// gates open (a Step Functions redrive succeeds anyway).
func (f *fleet) fix(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	f.fixed = true
	f.mu.Unlock()
	for tenant := range f.invs {
		f.restate.Gate(t, tenant, "open")
	}
}

// killMidJob waits until the fleet's job has acted on a third of its
// members, kills the worker with SIGKILL and returns the job and its
// outcomes then.
func (f *fleet) killMidJob(t *testing.T, p *process, total int) (string, int) {
	t.Helper()
	var j substate.Job
	workertest.EventuallyWithin(t, f.sizes.patience(5*time.Minute), func() string {
		code, out, errOut := runCLI(t, "actions", "list", "--limit", "1", "--server", p.httpURL, "-o", "json")
		var list struct{ Jobs []substate.Job }
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Jobs) == 0 {
			return fmt.Sprintf("no job yet: %d %s%s", code, out, errOut)
		}
		if j = list.Jobs[0]; j.Progress.Outcomes() < total/3 {
			return fmt.Sprintf("job %s: %d outcomes", j.ID, j.Progress.Outcomes())
		}
		return ""
	})
	p.kill(t)
	if j.Progress.Outcomes() >= total || j.State.Final() {
		t.Fatalf("the job ended before the kill: %+v", j.Progress)
	}
	return j.ID, j.Progress.Outcomes()
}

// checkReportIsAudit compares the job's report, page by page over HTTP,
// with SUBSTATE_AUDIT read directly: every member's last outcome.
func (f *fleet) checkReportIsAudit(t *testing.T, p *process, url, id string) {
	t.Helper()
	code, out, errOut := runCLI(t, "actions", "report", id, "--server", url, "-o", "json")
	var rep struct{ Members []substate.MemberOutcome }
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("report: %d %s", code, errOut)
	}
	report := map[int]string{}
	for _, m := range rep.Members {
		report[m.Member] = m.Outcome
	}
	audit, throttled := map[int]string{}, 0
	r := &replay.Reader{JS: p.bus(t).JetStream}
	for m, err := range r.Messages(context.Background(), substate.StreamAudit, substate.AuditJobSubject(id), replay.Range{}) {
		if err != nil {
			t.Fatal(err)
		}
		var ev substate.AuditEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		audit[ev.Member] = ev.Outcome
		if ev.ErrorCode == substate.ETHROTTLED {
			throttled++
		}
	}
	if len(audit) != f.sizes.total() || len(report) != len(audit) {
		t.Errorf("audit holds %d members' outcomes, the report %d, want %d", len(audit), len(report), f.sizes.total())
	}
	for n, o := range audit {
		if report[n] != o {
			t.Errorf("member %d: audit says %s, the report %s", n, o, report[n])
		}
	}
	if throttled > 0 {
		t.Errorf("%d audit events record throttling: it reached the operator", throttled)
	}
}

// checkActedOnce reads the providers' own records: every Step Functions
// execution redriven once (one successful RedriveExecution), every engine
// task called in two visits of its state, the step of its idempotency key
// (the failed one, the retry's: a retry asked twice would be a third; the
// attempts within a visit are the engine's own, such as an attempt in
// flight when the worker was killed, repeated when it restarts), every
// Restate invocation attempted four times (three failures, one resumed
// attempt).
func (f *fleet) checkActedOnce(t *testing.T) {
	t.Helper()
	calls, throttled, tasks := map[string]int{}, 0, 0
	for _, c := range f.aws.Log() {
		switch {
		case c.Failed == "ThrottlingException":
			throttled++
		case c.Op == "RedriveExecution" && c.Failed == "":
			calls[c.ExecutionARN]++
		}
	}
	if throttled == 0 {
		t.Error("Step Functions throttled no call: the test shows nothing of throttling")
	}
	for i := range f.sizes.sfn {
		arn := awstest.ExecutionARN(f.machine, fmt.Sprintf("run-fleet-s-%05d", i))
		if e, _ := f.aws.Execution(arn); e.RedriveCount != 1 || calls[arn] != 1 {
			t.Errorf("%s: redriven %d times, %d RedriveExecution calls", arn, e.RedriveCount, calls[arn])
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.sizes.engine {
		tenant := fmt.Sprintf("fleet-e-%05d", i)
		steps := map[string]bool{}
		for key, n := range f.charges[tenant] {
			steps[taskStep(key)] = true
			tasks += n
		}
		if len(steps) != 2 {
			t.Errorf("%s: its task ran in %d visits of its state (%v), want 2: the failed one and the retry's", tenant, len(steps), f.charges[tenant])
		}
	}
	for tenant, id := range f.invs {
		if n := f.restate.Attempts(t, id); n != 4 {
			t.Errorf("%s (%s): %d attempts, want 4", tenant, id, n)
		}
	}
	t.Logf("%d Step Functions calls throttled; %d engine task calls for %d executions", throttled, tasks, f.sizes.engine)
}

// taskStep is the step of an engine task's idempotency key
// (<execution>/<step>/<state>/<attempt>): which visit of its state.
func taskStep(key string) string {
	if parts := strings.Split(key, "/"); len(parts) == 4 {
		return parts[1]
	}
	return "unkeyed " + key
}

// busAs connects to the worker's NATS as id, reconnecting for as long as
// the test runs (the worker, and its embedded server, may be killed and
// started again).
func (p *process) busAs(t *testing.T, id bus.Identity) *nats.Conn {
	t.Helper()
	opts, err := (bus.Credentials{Dir: worker.NATSCredentialsDir(p.dataDir)}).Options(id)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(p.nats, append(opts, nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
