// Package reconcile sweeps the view for the executions nothing was heard
// of for a while and asks their provider again: the Reconciler (which
// also reads each execution once after it fails, and checks failed ones
// for a retry done elsewhere), its per-provider Pacer and hold on a
// refusing provider, and the metrics and the sweep loop (Sweeps) it
// shares with the Restate admin-API poller. A poll result is published on
// SUBSTATE_RAW like any provider event and never written to the view
// directly (see docs/reconciler.md).
package reconcile
