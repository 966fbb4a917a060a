package substate

// Revision orders the events of one execution: an event applies to the view
// only when its revision is greater than the last one applied for the same
// execution. Each provider fills it from its own order key:
//
//   - Step Functions: (redrive count, status rank, history event id);
//   - Restate: (modified_at, retry_count, status rank), since modified_at
//     does not move while an invocation retries;
//   - engine: the execution's emission sequence number.
//
// The provider formulas live with the mapping that fills them
// (mapping.StepFunctionsRevision, mapping.RestateRevision).
//
// Revisions stay below 2^53 so they survive JSON consumers that use doubles.
type Revision uint64
