package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/substatehq/substate/worker"
)

// BenchmarkChanges runs the bench's changes scenario alone, with no
// console and with Consoles open streams, and reports its figures: CPU
// time and allocations per event (the process's, load generator and
// stream readers included, as the bench counts them), events/s.
func BenchmarkChanges(b *testing.B) {
	for _, consoles := range []int{0, 1, Consoles} {
		b.Run(fmt.Sprintf("consoles=%d", consoles), func(b *testing.B) {
			var cpu, allocs, rate float64
			runs := 0
			for b.Loop() {
				res := changesScenario(b, 20000, consoles)
				cpu, allocs, rate = cpu+res.CPUPerEvent, allocs+res.AllocsPerEvent, rate+res.EventsPerSecond
				runs++
			}
			b.ReportMetric(cpu/float64(runs), "cpu-µs/event")
			b.ReportMetric(allocs/float64(runs), "allocs/event")
			b.ReportMetric(rate/float64(runs), "events/s")
		})
	}
}

// changesScenario runs n events of the changes load through a fresh
// pipeline in a temporary directory.
func changesScenario(tb testing.TB, n, consoles int) *ScenarioResult {
	tb.Helper()
	dir := tb.TempDir()
	f := worker.DefaultFlags()
	f.DataDir, f.HTTPAddr, f.NATSListen = dir, "127.0.0.1:0", "127.0.0.1:-1"
	c := Config{Events: n, Tenants: n, Rate: 1, Duration: time.Second, Flags: f}
	logs, err := worker.OpenLogFile(filepath.Join(dir, "bench.log"))
	if err != nil {
		tb.Fatal(err)
	}
	defer logs.Close()
	br := &benchRun{Config: &c, root: filepath.Join(dir, "bench"), logs: logs,
		load: benchLoad{shape: loadChanges, tenants: spread(n), start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		rng:  rand.New(rand.NewPCG(1, 2))}
	res, err := br.scenario(context.Background(), "changes", f.BatchSize, br.load, br.load.events(n, br.rng), drive{window: br.window(), consoles: consoles})
	if err != nil {
		tb.Fatal(err)
	}
	if res.ViewCheck != "ok" {
		tb.Fatalf("view: %s", res.ViewCheck)
	}
	return res
}
