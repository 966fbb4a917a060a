// Package faults breaks real storage on purpose, for tests of what
// substate does when a disk or a file fails it: a page of garbage in a
// bbolt file, garbage in a JetStream message block, a full file system,
// a server that stops answering while its connections stay open (Proxy).
// Each helper works on the real thing (a bbolt file, a nats-server store
// directory, a tmpfs mount), never on a fake, and each has a test that
// shows what the real thing then does.
package faults
