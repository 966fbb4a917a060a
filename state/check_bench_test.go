package state_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

// BenchmarkCheck measures Check, which Open also runs, over views of
// growing size, and reports the file size and the check rate.
func BenchmarkCheck(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			db := openDB(b, fast)
			populationFast(b, db, n)
			st, err := os.Stat(db.Path)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := db.Check(); err != nil {
					b.Fatal(err)
				}
			}
			mb := float64(st.Size()) / (1 << 20)
			b.ReportMetric(mb, "file-MB")
			b.ReportMetric(mb/(b.Elapsed().Seconds()/float64(b.N)), "MB/s")
		})
	}
}

// populationFast applies one event to each of n tenants in batches;
// every third tenant is in error.
func populationFast(tb testing.TB, db *state.DB, n int) {
	tb.Helper()
	s := newStream(tb, db)
	for lo := 0; lo < n; lo += 5000 {
		var evs = make([]substate.EventData, 0, 5000)
		for i := lo; i < min(lo+5000, n); i++ {
			if i%3 == 0 {
				evs = append(evs, ev(tenantID(i), "x", errored, 1, retries(i%10), failure("boom "+tenantID(i))))
			} else {
				evs = append(evs, ev(tenantID(i), "x", running, 1, retries(i%10)))
			}
		}
		s.apply(evs...)
	}
}
