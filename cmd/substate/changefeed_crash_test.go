package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestCrashChangeFeed kills the worker process with SIGKILL at random
// moments while Restate rows flow in, restarts it on the same data, again
// and again, then stops it cleanly. Every change the view committed is in
// SUBSTATE_CHANGES exactly once and in order: each tenant's changes form
// one chain from the empty view to the live one, each change's old view
// being the previous change's new view, so a lost change breaks the chain
// and a repeated one repeats a sequence. SUBSTATE_SOAK_KILLS sets more
// kills (make soak).
func TestCrashChangeFeed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills worker processes")
	}
	kills := 5
	if v := os.Getenv("SUBSTATE_SOAK_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SUBSTATE_SOAK_KILLS=%q: want a positive number", v)
		}
		kills = n
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	done := 0
	for done < kills { // five kills on a fresh data dir each time
		done += crashFeed(t, t.TempDir(), 6, 40, rng)
	}
	t.Logf("%d kills", done)
}

// crashFeed runs rounds of traffic into a worker on dir, killing it at a
// random moment in every round but the last, and checks the change feed
// against the view; it returns the number of kills.
func crashFeed(tb testing.TB, dir string, rounds, tenants int, rng *rand.Rand) int {
	tb.Helper()
	httpAddr, natsAddr := workertest.FreeAddr(tb), workertest.FreeAddr(tb)
	steps := len(workertest.RestateStatuses)
	next := make([]int, tenants)
	kills := 0
	for round := range rounds {
		p := startProcess(tb, dir, httpAddr, natsAddr)
		upTo := min(steps, (round+1)*steps/max(rounds-1, 1))
		posted := postRound(p.httpURL, next, upTo, 4)
		if round == rounds-1 {
			<-posted
			workertest.WaitSettled(tb, p.nats, p.nkey)
			p.terminate(tb)
			break
		}
		select {
		case <-time.After(time.Duration(rng.IntN(600)) * time.Millisecond):
		case <-posted:
		}
		p.kill(tb)
		kills++
		<-posted // the posts the kill cut short are delivered again next round
	}
	checkFeedChains(tb, dir)
	return kills
}

// checkFeedChains checks the change feed of a stopped worker's data dir
// against its view.
func checkFeedChains(tb testing.TB, dir string) {
	tb.Helper()
	viewPath := filepath.Join(dir, "view.db")
	db := state.NewDB(viewPath)
	if err := db.Open(); err != nil {
		tb.Fatal(err)
	}
	n, err := db.OutboxLen()
	db.Close()
	if err != nil || n != 0 {
		tb.Fatalf("the outbox holds %d changes after a clean stop (%v)", n, err)
	}
	live := readView(tb, viewPath)
	b, err := bus.Open(bus.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dir, "nats")})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	last := map[string]substate.Change{}
	feed := bustest.Changes(tb, b.JetStream)
	for _, fc := range feed {
		c, prev := fc.Change, last[fc.Change.TenantID]
		if got, want := statusOf(c.Old), statusOf(prev.New); got != want {
			tb.Errorf("tenant %s: change %d starts from %+v, the previous change ended at %+v: a change is missing", c.TenantID, c.Seq, got, want)
		}
		last[c.TenantID] = c
	}
	if len(last) != len(live) {
		tb.Errorf("the feed has changes of %d tenants, the view holds %d", len(last), len(live))
	}
	for id, v := range live {
		if got, want := statusOf(last[id].New), statusOf(v); got != want {
			tb.Errorf("tenant %s: the feed ends at %+v, the view is %+v", id, got, want)
		}
	}
	tb.Logf("%d changes of %d tenants in the feed", len(feed), len(last))
}

// feedStatus is what the dirty check compares: a change of any of it is a
// change on the feed.
type feedStatus struct {
	SubState   substate.SubState
	Verb       substate.Verb
	Execution  string
	RetryCount int
	Error      string
	Step       string
}

func statusOf(v substate.TenantView) feedStatus {
	return feedStatus{v.WorkflowSubState, v.WorkflowVerb, v.WorkflowExecutionID, v.WorkflowRetryCount, v.WorkflowErrorMessage, v.WorkflowStep}
}
