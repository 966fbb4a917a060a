package actions_test

import (
	"context"
	"testing"
	"time"

	"github.com/substatehq/substate"
)

// TestRequeueResumesAfterStop: a requeue under way when its worker stops
// gets no outcome (the requeue saw no answer, the worker did not give
// up on it): the job resumes it on the next runner, which requeues it.
func TestRequeueResumesAfterStop(t *testing.T) {
	f := newFleet(t)
	ctx := context.Background()
	if err := f.p.Pub.PublishDeadLetter(ctx, substate.DeadLetter{Stage: "normalize", Reason: "no tenant",
		Subject: substate.RawSubject(substate.RawEngine), Seq: 7, Body: []byte(`{"tenantId":"acme-1"}`)}); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	f.requeue = func(ctx context.Context, _ uint64, _ func(string) error) (int, error) {
		started <- struct{}{}
		<-ctx.Done() // the worker stops while the raw message is mapped again
		return 0, ctx.Err()
	}
	f.start(t)
	j, err := f.svc.Create(ctx, substate.JobRequest{Action: substate.ActionRequeue, Filter: map[string]string{}, Reason: "rule fixed", Who: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the requeue was not asked for")
	}
	f.runner.Close()
	if got := f.auditOutcomes(t, j.ID); len(got) != 0 {
		t.Fatalf("outcomes recorded as the worker stopped: %v, want none (the member resumes)", got)
	}
	var seqs []uint64
	f.requeue = func(_ context.Context, seq uint64, _ func(string) error) (int, error) {
		seqs = append(seqs, seq)
		return 1, nil
	}
	f.start(t)
	j = f.waitJob(t, j.ID, time.Minute)
	if j.State != substate.JobDone || j.Progress.Done != 1 || len(seqs) != 1 || seqs[0] != 7 {
		t.Fatalf("resumed job %+v, requeued raw sequences %v, want 7 once", j.Progress, seqs)
	}
	if got := f.auditOutcomes(t, j.ID); got[1] != substate.AuditDone {
		t.Errorf("audit %v, want member 1 done", got)
	}
}
