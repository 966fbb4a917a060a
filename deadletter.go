package substate

import (
	"context"
	"encoding/json"
	"time"
)

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

// StoredDeadLetter is a dead letter as SUBSTATE_DLQ keeps it, as GET
// /v1/deadletters and "substate events dlq" show it.
type StoredDeadLetter struct {
	Seq        uint64    `json:"seq"`  // its sequence in SUBSTATE_DLQ
	Time       time.Time `json:"time"` // when SUBSTATE_DLQ stored it
	Stage      string    `json:"stage"`
	Reason     string    `json:"reason"`
	Subject    string    `json:"subject"`              // the subject the input arrived on
	SubjectSeq uint64    `json:"subjectSeq,omitempty"` // its sequence there, when it came from a stream
	OriginalID string    `json:"originalId,omitempty"` // the input's own id (Nats-Msg-Id), when it had one
	TenantID   string    `json:"tenantId,omitempty"`   // the tenant the payload names, when it names one
	Size       int       `json:"size"`                 // the payload's length in bytes
	// Payload is the input as received: JSON as JSON, other bytes as a
	// JSON string. Redacted says its execution input and output are
	// hidden; PayloadOmitted, when set, says why there is no payload.
	Payload        json.RawMessage `json:"payload,omitempty"`
	Redacted       bool            `json:"redacted"`
	PayloadOmitted string          `json:"payloadOmitted,omitempty"`
}

// DeadLetterQuery selects dead letters, oldest first: of one stage (""
// for all), stored at or after Since, after the sequence AfterSeq, at
// most Limit of them (0 for the reader's default).
type DeadLetterQuery struct {
	Stage    string
	Since    time.Time
	AfterSeq uint64
	Limit    int
}

// DeadLetterPage is a page of dead letters, oldest first.
type DeadLetterPage struct {
	DeadLetters []StoredDeadLetter `json:"deadLetters"`
	// NextAfterSeq, when not 0, is the AfterSeq of the next page: more
	// dead letters are stored already.
	NextAfterSeq uint64 `json:"nextAfterSeq,omitempty"`
}

// DeadLetterReader reads the dead letters SUBSTATE_DLQ keeps.
type DeadLetterReader interface {
	DeadLetters(ctx context.Context, q DeadLetterQuery) (DeadLetterPage, error)
}

// UnresolvedMemory remembers, for a while and for every process that
// shares it, the executions whose tenant no rule resolved and that a dead
// letter has reported: the normalizer dead-letters the first raw event of
// such an execution and acknowledges the later ones without a dead letter
// of their own (the raw stream keeps them as evidence).
type UnresolvedMemory interface {
	// Reported reports whether a dead letter reported the execution.
	Reported(ctx context.Context, p Provider, executionID string) (bool, error)
	// Remember records that a dead letter reported the execution.
	Remember(ctx context.Context, p Provider, executionID string) error
}
