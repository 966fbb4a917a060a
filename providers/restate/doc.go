// Package restate reads and acts on Restate through its admin API: the
// Client, the one way to it (with one set of limits), the Poller, which
// discovers invocations and reads the rows of the tracked
// ones (with a paused invocation's journal failures and its handler's
// retry policy) and publishes them on SUBSTATE_RAW, and the Operator,
// which describes, stops, resumes and restarts invocations. Restate sends
// no notifications of its own; its webhooks arrive through
// the ingress package.
package restate
