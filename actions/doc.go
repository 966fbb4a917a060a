// Package actions runs fleet jobs: one action (retry, stop, restart, or a
// requeue of dead letters) on every member of a set a filter selected,
// frozen when the job is created at one view position.
//
// A job's record lives on JetStream (SUBSTATE_ACTIONS): its request and
// frozen set, an intent before every provider call, the operators'
// controls (pause, resume, cancel) and its state. Workers take jobs from a
// durable consumer and hold them while they run, so a job whose worker
// stopped (even by kill -9) comes back to a worker and resumes. Every
// member's outcome is an audit event under the job on SUBSTATE_AUDIT,
// recorded by operate.Service, which acts on each member; progress and the
// report are folded from those events, so they agree with the audit trail
// by construction. Before acting on a member the job checks it against
// the view now (a changed member is skipped), takes a lease on its
// execution (SUBSTATE_LEASES) so two jobs never act on one execution at
// once, and waits for its lane: each provider has its own concurrency and
// a token bucket per API, and backs off with jitter when throttled.
package actions
