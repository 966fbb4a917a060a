package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/workertest"
)

// backingOffRow is a Restate row of tenant's invocation of the Provision
// service, backing off since at.
func backingOffRow(tenant string, at time.Time) []byte {
	row, _ := json.Marshal(map[string]any{"id": "inv_" + tenant, "target_service_name": "Provision", "target_service_key": tenant,
		"status": "backing-off", "retry_count": 2, "last_failure": "[503] downstream unavailable",
		"created_at": at.Add(-time.Second).Format(time.RFC3339Nano), "modified_at": at.Format(time.RFC3339Nano)})
	return row
}

// tenantView reads a tenant's view from a worker process.
func tenantView(t *testing.T, url, tenant string) substate.TenantView {
	t.Helper()
	var v substate.TenantView
	if code := workertest.GetJSON(t, url+"/v1/tenants/"+tenant, &v); code != http.StatusOK {
		t.Fatalf("GET /v1/tenants/%s: %d", tenant, code)
	}
	return v
}

// waitDeadline waits until the tenant's view has a deadline and returns
// the view.
func waitDeadline(t *testing.T, url, tenant string) substate.TenantView {
	t.Helper()
	var v substate.TenantView
	workertest.Eventually(t, func() string {
		if code := workertest.GetJSON(t, url+"/v1/tenants/"+tenant, &v); code != http.StatusOK || v.Deadline.IsZero() {
			return fmt.Sprintf("%s: %d, no deadline yet", tenant, code)
		}
		return ""
	})
	return v
}

// TestStuckAfterKill kills the worker with SIGKILL while a tenant holds a
// deadline, lets the deadline pass while nothing runs, and starts it
// again: the stuck message is published at start, once, and the view
// says stuck since the deadline.
func TestStuckAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills worker processes")
	}
	dir := t.TempDir()
	slo := filepath.Join(t.TempDir(), "slo.yaml")
	if err := os.WriteFile(slo, []byte("workflows:\n  \"*\":\n    backing-off: 2s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	httpAddr, natsAddr := workertest.FreeAddr(t), workertest.FreeAddr(t)
	p := startProcess(t, dir, httpAddr, natsAddr, "--slo-file", slo)
	if err := workertest.DeliverRow(p.httpURL, "bo-1", backingOffRow("acme", time.Now().UTC())); err != nil {
		t.Fatal(err)
	}
	v := waitDeadline(t, p.httpURL, "acme")
	if v.Stuck || !time.Now().Before(v.Deadline) {
		t.Fatalf("view %+v: the deadline passed before the kill", v)
	}
	p.kill(t)
	time.Sleep(time.Until(v.Deadline) + time.Second)

	started := time.Now()
	p = startProcess(t, dir, httpAddr, natsAddr, "--slo-file", slo)
	b := p.bus(t)
	var stuck []bustest.FeedChange
	workertest.Eventually(t, func() string {
		stuck = stuck[:0]
		for _, c := range bustest.Changes(t, b.JetStream) {
			if c.Change.Kind == substate.ChangeStuck {
				stuck = append(stuck, c)
			}
		}
		if len(stuck) == 0 {
			return "no stuck message after the restart"
		}
		return ""
	})
	c := stuck[0].Change
	if len(stuck) != 1 || c.TenantID != "acme" || !c.New.StuckSince.Equal(v.Deadline) || stuck[0].Msg.Time.Before(started) {
		t.Fatalf("stuck messages %+v; want one for acme, published after the restart, stuck since %s", stuck, v.Deadline)
	}
	if got := tenantView(t, p.httpURL, "acme"); !got.Stuck || !got.StuckSince.Equal(v.Deadline) {
		t.Fatalf("view after the restart: %+v", got)
	}
	p.terminate(t)
}

// TestSLOFileReload sends SIGHUP with hostile SLO files in place: each is
// refused in the log with its file and line, and the deadlines stay those
// of the SLOs in force; a good file then moves them.
func TestSLOFileReload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a worker process")
	}
	slo := filepath.Join(t.TempDir(), "slo.yaml")
	write := func(text string) {
		t.Helper()
		_ = os.RemoveAll(slo)
		if err := os.WriteFile(slo, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("workflows:\n  \"*\":\n    backing-off: 1h\n")
	p := startWorkerProcess(t, t.TempDir(), "--slo-file", slo)
	since := time.Now().UTC().Truncate(time.Millisecond)
	if err := workertest.DeliverRow(p.httpURL, "bo-1", backingOffRow("acme", since)); err != nil {
		t.Fatal(err)
	}
	want := waitDeadline(t, p.httpURL, "acme").Deadline
	if !want.Equal(since.Add(time.Hour)) {
		t.Fatalf("deadline %s, want an hour after %s", want, since)
	}
	var million strings.Builder
	million.WriteString("workflows:\n")
	for i := range 1_000_000 {
		fmt.Fprintf(&million, "  w%d: {run: 1h}\n", i)
	}
	cases := []struct {
		name, text, want string
	}{
		{"UnknownSubState", "workflows:\n  \"*\":\n    stalled: 1h\n", `slo.yaml:3:5: workflow \"*\": unknown key \"stalled\"`},
		{"Negative", "workflows:\n  \"*\":\n    backing-off: -10m\n", `slo.yaml:3:18: workflow \"*\": backing-off: -10m0s is negative`},
		{"Absurd", "workflows:\n  \"*\":\n    run: 100000h\n", `slo.yaml:3:10: workflow \"*\": run: 100000h0m0s is longer than`},
		{"MillionEntries", million.String(), "slo.yaml:1:1: the file is larger than 1048576 bytes"},
		{"Unreadable", "", "read SLO file"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.text == "" {
				_ = os.Remove(slo)
				if err := os.Mkdir(slo, 0o700); err != nil { // a directory reads as an error
					t.Fatal(err)
				}
			} else {
				write(c.text)
			}
			if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			workertest.Eventually(t, func() string {
				if n := strings.Count(p.logs.String(), "SLO file not reloaded"); n < i+1 {
					return fmt.Sprintf("%d refusals logged, want %d", n, i+1)
				}
				return ""
			})
			if logs := p.logs.String(); !strings.Contains(logs, c.want) {
				t.Fatalf("the refusal does not say %q:\n%s", c.want, logs)
			}
			if got := tenantView(t, p.httpURL, "acme"); !got.Deadline.Equal(want) {
				t.Fatalf("deadline %s after a refused file, want %s", got.Deadline, want)
			}
		})
	}
	_ = os.RemoveAll(slo)
	write("workflows:\n  \"*\":\n    backing-off: 30m\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	workertest.Eventually(t, func() string {
		if got := tenantView(t, p.httpURL, "acme").Deadline; !got.Equal(since.Add(30 * time.Minute)) {
			return fmt.Sprintf("deadline %s after a good file, want 30 minutes after %s", got, since)
		}
		return ""
	})
}

// A worker whose SLO file has a problem does not start, and says where.
func TestRunRefusesBadSLOFile(t *testing.T) {
	slo := filepath.Join(t.TempDir(), "slo.yaml")
	if err := os.WriteFile(slo, []byte("workflows:\n  billing:\n    succeeded: 1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runBinary(t, "run", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--slo-file", slo)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != 1 || len(lines) != 1 || !strings.Contains(errOut, slo+`:3:5: workflow "billing": unknown key "succeeded"`) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
