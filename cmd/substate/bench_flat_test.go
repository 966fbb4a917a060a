package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/substatehq/substate/tools/bench"
)

// The flat-cost scenario's code path with a small count: every chunk is
// applied by the worker before it is measured, and each row reports the
// worker's and the server's memory (the bench process's live Go heap no more
// than what its runtime holds), the view file and the streams' bytes
// per million events. The documented figure runs --flat 10000000.
// --flat-limit 0 sets no time limit: every event is sent.
func TestBenchFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a worker process")
	}
	code, out, errOut := runCLIFor(t, 3*time.Minute, "bench", "--json", "--data-dir", t.TempDir(),
		"--nats-listen", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-level", "warn",
		"--flat", "5000", "--tenants", "50", "--dedupe-window", "2m", "--flat-limit", "0")
	// The report's window is the streams', so a worker that set its own
	// default over the bench's --dedupe-window fails here.
	if code != 0 {
		t.Fatalf("bench --flat exited with %d: %s", code, errOut)
	}
	var rep bench.FlatReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	if rep.Tenants != 50 || len(rep.Rows) != bench.FlatRows || rep.Rows[bench.FlatRows-1].Events != 5000 || rep.DedupeWindow != "2m0s" {
		t.Fatalf("report %+v, want %d rows up to 5000 events over 50 tenants", rep, bench.FlatRows)
	}
	for _, r := range rep.Rows {
		if r.WorkerRSSMiB <= 0 || r.ServerRSSMiB <= 0 || r.HeapLiveMiB <= 0 || r.GoHeldMiB < r.HeapLiveMiB || r.ViewFileMiB <= 0 || r.RawMiBPerM <= 0 || r.EventsMiBPerM <= 0 {
			t.Errorf("row without a figure: %+v", r)
		}
	}
}
