// Package bus connects substate to NATS JetStream. It runs an embedded
// nats-server with JetStream when no URL is given (the single-binary
// default), connects to an existing NATS deployment otherwise, and declares
// substate's streams and durable consumers idempotently.
//
// Durability: JetStream acknowledges a publish once the message is in the
// stream's store. With the server's default sync policy the store is written
// at once but flushed to disk periodically (every two minutes), so a process
// crash loses nothing while an operating-system crash or power loss can lose
// the acknowledged messages of the last interval. SyncAlways flushes every
// write before acknowledging it, which is safe against power loss and slower.
// On a cluster, replicas (acknowledged by a quorum) are the usual answer.
package bus
