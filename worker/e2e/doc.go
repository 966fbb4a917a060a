// Package e2e holds the worker's end-to-end tests: a real worker in
// process (testkit/workertest) on the embedded NATS server and bbolt,
// driven over HTTP and NATS as its users drive it, and a headless
// Chromium for the console. Every response they fetch from a worker is
// checked against contract/openapi.json. The package has no code of its
// own; the commands' tests are in cmd/substate.
package e2e
