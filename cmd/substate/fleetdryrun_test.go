package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestFleetDryRunWorkerRestarted: the worker is killed with SIGKILL after
// it answered a dry run and before the answer reached the command (a proxy
// in between drops it). The command fails with one line saying that
// nothing was done; the restarted worker has no job, and the same dry run
// then answers the same set.
func TestFleetDryRunWorkerRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills worker processes")
	}
	dir, httpAddr, natsAddr := t.TempDir(), workertest.FreeAddr(t), workertest.FreeAddr(t)
	flags := []string{"--log-level", "warn", "--sfn-reconcile", "off"}
	p := startProcess(t, dir, httpAddr, natsAddr, flags...)
	const n = 5
	machine := awstest.StateMachineARN("provision")
	var batch []json.RawMessage
	for i := range n {
		tenant := fmt.Sprintf("dry-%02d", i)
		batch = append(batch, fleetSFNEvent(machine, "run-"+tenant, tenant, time.Now().UTC()))
	}
	body, _ := json.Marshal(batch)
	if code := workertest.Post(t, p.httpURL+"/v1/ingest/eventbridge", body, map[string]string{"Content-Type": "application/json"}); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	workertest.EventuallyWithin(t, time.Minute, func() string {
		code, out, _ := runCLI(t, "tenants", "list", "--tenant-prefix", "dry-", "--sub-state", "failed", "--server", p.httpURL, "-o", "json")
		if got := strings.Count(out, `"tenantId"`); code != 0 || got != n {
			return fmt.Sprintf("%d of %d tenants failed so far", got, n)
		}
		return ""
	})

	var dropped atomic.Int32
	worker := p
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target, _ := url.Parse(worker.httpURL)
		r.URL.Scheme, r.URL.Host, r.RequestURI = target.Scheme, target.Host, ""
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		worker.kill(t) // after the worker answered, before the command reads it
		dropped.Add(1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(proxy.Close)
	filter := "tenantPrefix=dry-,subState=failed"
	code, out, errOut := runCLI(t, "executions", "retry", "--filter", filter, "--dry-run", "--server", proxy.URL)
	if code == 0 || dropped.Load() != 1 || !strings.Contains(errOut, "nothing was done") {
		t.Fatalf("dry run cut off: exit %d, %d answers dropped\n%s%s", code, dropped.Load(), out, errOut)
	}
	t.Logf("the command said: %s", strings.TrimSpace(errOut))

	p = startProcess(t, dir, httpAddr, natsAddr, flags...)
	code, out, errOut = runCLI(t, "actions", "list", "--server", p.httpURL, "-o", "json")
	var list struct{ Jobs []substate.Job }
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Jobs) != 0 {
		t.Fatalf("jobs after a dry run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "executions", "retry", "--filter", filter, "--dry-run", "--server", p.httpURL, "-o", "json")
	var pv substate.JobPreview
	if code != 0 || json.Unmarshal([]byte(out), &pv) != nil || pv.Total != n {
		t.Fatalf("dry run again: exit %d, %d tenants, want %d\n%s%s", code, pv.Total, n, out, errOut)
	}
}
