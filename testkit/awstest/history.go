package awstest

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/substatehq/substate/internal/fixtures"
)

// RetryHistoryAt returns the first n events of the recorded Step Functions
// history of a Task that fails and is retried (sfn-history-retry.json),
// their times moved so that the last of them happened at last: a test
// cuts the history where the execution stands (n = 8: the task timed out,
// its retry interval running) and sets it with SetHistory.
func RetryHistoryAt(tb testing.TB, n int, last time.Time) []json.RawMessage {
	tb.Helper()
	var page struct{ Events []map[string]any }
	if err := json.Unmarshal(fixtures.Provider("sfn-history-retry.json"), &page); err != nil {
		tb.Fatal(err)
	}
	if n < 1 || n > len(page.Events) {
		tb.Fatalf("RetryHistoryAt: %d events of %d", n, len(page.Events))
	}
	shift := float64(last.UnixMilli())/1000 - page.Events[n-1]["timestamp"].(float64)
	out := make([]json.RawMessage, n)
	for i, e := range page.Events[:n] {
		e["timestamp"] = math.Round((e["timestamp"].(float64)+shift)*1000) / 1000
		out[i], _ = json.Marshal(e)
	}
	return out
}
