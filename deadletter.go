package substate

import "context"

// Pipeline stages that dead-letter input; the stage is the last token of the
// substate.dlq.<stage> subject.
const (
	StageIngest      = "ingest"
	StageNormalize   = "normalize"
	StageProject     = "project"
	StageForward     = "forward"
	StageEngine      = "engine"
	StageReconcile   = "reconcile"
	StageRenormalize = "renormalize"
)

// DeadLetter is input a stage could not process: the original bytes and
// headers, where they came from, and why. It is kept in SUBSTATE_DLQ.
type DeadLetter struct {
	Stage   string // the stage that gave up
	Reason  string // why, in words an operator can act on
	Subject string // the subject the input arrived on
	Seq     uint64 // its stream sequence, when it came from a stream
	// ID, when set, is the dead letter's Nats-Msg-Id, so the same input
	// dead-lettered twice within the duplicate window is kept once. Input
	// from a stream is identified by its subject and sequence instead.
	ID     string
	Body   []byte              // the original bytes
	Header map[string][]string // the original headers
}

// DeadLetterPublisher puts dead letters on SUBSTATE_DLQ and returns once
// JetStream acknowledged them.
type DeadLetterPublisher interface {
	PublishDeadLetter(ctx context.Context, d DeadLetter) error
}

// DeadLetterReason is the Reason of a dead letter refused with err: its
// error code and its message.
func DeadLetterReason(err error) string {
	return ErrorCode(err) + ": " + err.Error()
}
