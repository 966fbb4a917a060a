package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/testkit/workertest"
)

// deliver posts a tenant's step-th row, as Restate would.
func deliver(url string, tenant string, step int) error {
	return workertest.DeliverRow(url, fmt.Sprintf("%s-%d", tenant, step), workertest.RestateRow(tenant, step))
}

// TestCrashRecovery kills the worker with SIGKILL while it works, again
// and again: each round posts a slice of every tenant's history from
// several clients at once and kills the worker as soon as its projector
// holds a batch it has not acknowledged (or when the posting is over, if
// that moment was missed), with posts still in flight. After the last
// restart the view equals the reference fold of the event stream, no
// retry was counted twice, and the bbolt file is consistent.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills worker processes")
	}
	dir := t.TempDir()
	httpAddr, natsAddr := workertest.FreeAddr(t), workertest.FreeAddr(t)
	const tenants, rounds, clients = 120, 5, 8
	steps := len(workertest.RestateStatuses)
	next := make([]int, tenants) // the next step to deliver per tenant
	midBatch := 0
	for round := range rounds {
		p := startProcess(t, dir, httpAddr, natsAddr)
		upTo := min(steps, (round+1)*steps/(rounds-1))
		posted := postRound(p.httpURL, next, upTo, clients)
		if round == rounds-1 {
			<-posted
			workertest.WaitSettled(t, p.nats, p.nkey)
			p.terminate(t)
			break
		}
		if waitBatchInHand(t, p, posted) {
			midBatch++
		}
		p.kill(t)
		<-posted // the posts the kill cut short are delivered again next round
	}
	t.Logf("%d of %d kills hit the projector with a batch in hand", midBatch, rounds-1)

	live := readView(t, filepath.Join(dir, "view.db"))
	want := referenceFold(t, dir)
	if len(live) != tenants || len(want) != tenants {
		t.Fatalf("live view has %d tenants, reference %d, want %d", len(live), len(want), tenants)
	}
	for id, w := range want {
		got := live[id]
		got.UpdatedAt, w.UpdatedAt = time.Time{}, time.Time{}
		if got != w {
			t.Errorf("tenant %s:\n live %+v\n want %+v", id, got, w)
		}
		// Two backing-off → running transitions happened; a redelivery
		// applied twice would make it more. (Fewer is possible: a row the
		// killed worker held comes back after later ones, and a late row is
		// stale, so its transition is not seen.)
		if got.WorkflowRetryCount > 2 {
			t.Errorf("tenant %s: retry count %d, more than the 2 retries that happened", id, got.WorkflowRetryCount)
		}
	}
	checkBolt(t, filepath.Join(dir, "view.db"))
}

// postRound delivers each tenant's steps from next[i] up to upTo, from
// clients goroutines that each own a share of the tenants (so a tenant's
// rows go out in order), and closes the returned channel when all are done.
// A tenant whose post fails stops there for this round.
func postRound(url string, next []int, upTo, clients int) <-chan struct{} {
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := c; i < len(next); i += clients {
				for s := next[i]; s < upTo; s++ {
					if err := deliver(url, fmt.Sprintf("t%03d", i), s); err != nil {
						break
					}
					next[i] = s + 1
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// waitBatchInHand watches the worker until its view has committed a batch
// since the watch began and the projector's consumer holds more delivered
// but unacknowledged messages than it did then (what a killed predecessor
// held stays unacknowledged until the ack wait ends), and reports whether
// it saw that before the posts were over (posted closed) and the pipeline
// had nothing left to do.
func waitBatchInHand(tb testing.TB, p *process, posted <-chan struct{}) bool {
	tb.Helper()
	b, err := bus.Open(bus.Config{URL: p.nats, NkeyFile: p.nkey})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	unacked := func() int {
		return consumerState(tb, b.JetStream, substate.StreamEvents, bus.ProjectorConsumer("")).NumAckPending
	}
	held, cp := unacked(), p.checkpoint(tb)
	for {
		if p.checkpoint(tb) > cp && unacked() > held {
			return true
		}
		select {
		case <-posted:
			if idle(tb, b.JetStream) {
				return false
			}
		default:
		}
	}
}

// checkpoint returns the last sequence the worker's view committed.
func (p *process) checkpoint(tb testing.TB) uint64 {
	tb.Helper()
	var pos httpapi.ViewPosition
	if code := workertest.GetJSON(tb, p.httpURL+"/v1/view/checkpoint", &pos); code != http.StatusOK {
		tb.Fatalf("view checkpoint: status %d", code)
	}
	return pos.Checkpoint
}

// TestSIGTERMDrains stops a busy worker with SIGTERM: it exits 0 and leaves
// no message delivered but unacknowledged.
func TestSIGTERMDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a worker process")
	}
	dir := t.TempDir()
	httpAddr, natsAddr := workertest.FreeAddr(t), workertest.FreeAddr(t)
	p := startProcess(t, dir, httpAddr, natsAddr)
	for i := range 200 {
		if err := deliver(p.httpURL, fmt.Sprintf("t%03d", i), i%len(workertest.RestateStatuses)); err != nil {
			t.Fatal(err)
		}
	}
	p.terminate(t)
	b, err := bus.Open(bus.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dir, "nats")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, c := range []struct{ stream, name string }{{substate.StreamRaw, bus.ConsumerNormalizer}, {substate.StreamEvents, bus.ProjectorConsumer("")}} {
		if info := consumerState(t, b.JetStream, c.stream, c.name); info.NumAckPending != 0 {
			t.Errorf("%s: %d messages delivered but not acknowledged after SIGTERM", c.name, info.NumAckPending)
		}
	}
	checkBolt(t, filepath.Join(dir, "view.db"))
}
