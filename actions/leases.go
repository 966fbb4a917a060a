package actions

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
)

// lease is who acts on an execution (or a dead letter) now.
type lease struct {
	Job    string    `json:"job"`
	Member int       `json:"member"`
	Tenant string    `json:"tenantId"`
	At     time.Time `json:"at"`
}

// leases are the per-execution leases of SUBSTATE_LEASES: a lease is
// taken by publishing on the execution's subject only when nothing is
// there (compare-and-set on the subject's last sequence), given back by
// purging the subject, and dropped by the stream after bus.LeaseTime when
// its job never gave it back.
type leases struct {
	js jetstream.JetStream
}

// take takes the lease on one execution of a lane for l's job. It
// returns true when the job holds it (taken now, or held since before a
// restart), and otherwise the job that holds it.
func (ls *leases) take(ctx context.Context, lane, id string, l lease) (bool, string, error) {
	data, err := json.Marshal(l)
	if err != nil {
		return false, "", err
	}
	m := nats.NewMsg(substate.LeaseSubject(lane, id))
	m.Data = data
	_, err = ls.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(0))
	if err == nil {
		return true, "", nil
	}
	if !wrongLastSequence(err) {
		return false, "", substate.WrapError(substate.EUNAVAILABLE, err, "take the lease on %s", id)
	}
	holder, err := ls.holder(ctx, lane, id)
	if err != nil {
		return false, "", err
	}
	if holder.Job == "" { // given back meanwhile
		return ls.take(ctx, lane, id, l)
	}
	return holder.Job == l.Job && holder.Member == l.Member, holder.Job, nil
}

// holder returns the lease on an execution, the zero lease when none.
func (ls *leases) holder(ctx context.Context, lane, id string) (lease, error) {
	var l lease
	st, err := ls.js.Stream(ctx, substate.StreamLeases)
	if err != nil {
		return l, substate.WrapError(substate.EUNAVAILABLE, err, "read the lease on %s", id)
	}
	m, err := st.GetLastMsgForSubject(ctx, substate.LeaseSubject(lane, id))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return l, nil
	case err != nil:
		return l, substate.WrapError(substate.EUNAVAILABLE, err, "read the lease on %s", id)
	}
	_ = json.Unmarshal(m.Data, &l)
	if l.Job == "" {
		l.Job = "an unknown job"
	}
	return l, nil
}

// release gives the lease on an execution back.
func (ls *leases) release(ctx context.Context, lane, id string) error {
	st, err := ls.js.Stream(ctx, substate.StreamLeases)
	if err == nil {
		err = st.Purge(ctx, jetstream.WithPurgeSubject(substate.LeaseSubject(lane, id)))
	}
	if err != nil {
		return substate.WrapError(substate.EUNAVAILABLE, err, "give back the lease on %s", id)
	}
	return nil
}

// wrongLastSequence reports whether err is JetStream's refusal of a
// compare-and-set publish (10071; 10164 on a replicated stream).
func wrongLastSequence(err error) bool {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return false
	}
	return api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}
