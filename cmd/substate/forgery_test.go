package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestVerifyFailsOnOlderMappingForgery is the attack of a forged event
// that claims an older mapping version, against "substate run": a copy of
// a genuine failed event with a new id, subState succeeded, mappingVersion
// 1, a later revision and headers pointing at the genuine raw evidence.
// The view takes it (its publisher held the worker's identity), but
// "substate verify" reports it forged and exits 1, even when it accepts
// events of other mapping versions, and the worker's own evidence check
// counts it forged.
func TestVerifyFailsOnOlderMappingForgery(t *testing.T) {
	w := startWorkerProcess(t, t.TempDir(), "--evidence-check-interval", "100ms")
	workertest.IngestTenant(t, w.httpURL, "victim", "")
	b := w.bus(t)
	var genuine replay.Event
	workertest.Eventually(t, func() string {
		for e, err := range (&replay.Reader{JS: b.JetStream}).Events(context.Background(), "victim", replay.Range{}) {
			if err != nil {
				return err.Error()
			}
			genuine = e
		}
		if genuine.Seq == 0 {
			return "no event of victim yet"
		}
		return ""
	})

	forged := genuine.Event
	forged.ID = "forged-older-mapping"
	forged.Data.SubState, forged.Data.Verb, forged.Data.Status, forged.Data.ErrorMessage = substate.StateSucceeded, "", "", ""
	forged.Data.MappingVersion, forged.Data.Revision = 1, genuine.Event.Data.Revision+1
	forged.Data.Normalize()
	forged.Type = substate.EventTypeFor(forged.Data.SubState)
	body, err := substate.MarshalEvent(forged)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(genuine.Subject)
	msg.Data = body
	msg.Header.Set(substate.HeaderMsgID, forged.ID)
	msg.Header.Set(substate.HeaderRawSeq, strconv.FormatUint(genuine.RawRef().Seq, 10))
	msg.Header.Set(substate.HeaderRawID, genuine.RawRef().ID)
	if _, err := b.JetStream.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	workertest.Eventually(t, func() string {
		code, out, _ := runCLI(t, "tenants", "get", "victim", "--server", w.httpURL, "--json")
		if code != 0 || !strings.Contains(out, `"workflowSubState": "succeeded"`) {
			return "the forged event has not reached the view: " + out
		}
		return ""
	})

	for _, extra := range [][]string{nil, {"--accept-unverified"}} {
		code, out, errOut := runCLI(t, append(append([]string{"verify", "--server", w.httpURL}, w.natsArgs()...), extra...)...)
		if code != 1 || !strings.Contains(out, "forged: claims mapping version 1, but its id is not one") || !strings.Contains(out, "1 forged") {
			t.Errorf("verify %v: exit %d, want 1 naming the forgery\n%s%s", extra, code, out, errOut)
		}
	}
	workertest.Eventually(t, func() string {
		if _, m := workertest.Get(t, w.httpURL+"/metrics"); !strings.Contains(m, `substate_evidence_events_total{outcome="forged"} 1`+"\n") {
			return "the worker's evidence check has not counted the forgery"
		}
		return ""
	})
}
