// Package worker composes a running substate from its flags: NATS
// (embedded or not) and the streams, the view, the pipeline's stages
// (normalizer, projector, EventBridge forwarder, change feed), the
// reconciler and the Restate poller, the built-in workflow engine, and the
// HTTP server with the ingress, the read API, the operator console and
// /metrics. The role (--role) chooses which of them one process runs.
//
// Flags carries the command line's struct tags, so a command embeds it
// and parses it; New returns a Worker for them, Open starts what the role
// runs, Run runs it until its context is done or a part fails, and Close
// stops it.
package worker
