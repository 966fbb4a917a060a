package demorun

import (
	"strings"
	"testing"

	"github.com/substatehq/substate/worker"
)

// TestExploreHint checks that the commands the demo suggests at its end
// reach the addresses it ran on.
func TestExploreHint(t *testing.T) {
	f := worker.Flags{DataDir: "./data", HTTPAddr: defaultHTTPAddr}
	f.NATSListen = defaultNATSListen
	want := `
To look around, start the worker again on the demo's data, then ask it from another terminal:
  substate run --data-dir ./data
  substate tenants list --has-error
  substate audit --tenant initech
  substate verify
To retry the order that failed because the courier was down, run the demo with --stay and, from another terminal:
  substate executions retry cyberdyne --reason "the courier is back"
`
	if got := exploreHint(f, "initech", "cyberdyne"); got != want {
		t.Errorf("defaults:\n%s\nwant\n%s", got, want)
	}

	f = worker.Flags{DataDir: "/tmp/my demo", HTTPAddr: "127.0.0.1:28080"}
	f.NATSListen = "127.0.0.1:24222"
	want = `
To look around, start the worker again on the demo's data, then ask it from another terminal:
  substate run --data-dir '/tmp/my demo' --http-addr 127.0.0.1:28080 --nats-listen 127.0.0.1:24222
  substate tenants list --has-error --server http://127.0.0.1:28080
  substate audit --tenant 'acme corp' --nats-url nats://127.0.0.1:24222 --data-dir '/tmp/my demo'
  substate verify --server http://127.0.0.1:28080 --nats-url nats://127.0.0.1:24222 --data-dir '/tmp/my demo'
To retry the order that failed because the courier was down, run the demo with --stay and, from another terminal:
  substate executions retry cyberdyne --reason "the courier is back" --server http://127.0.0.1:28080
`
	if got := exploreHint(f, "acme corp", "cyberdyne"); got != want {
		t.Errorf("other addresses:\n%s\nwant\n%s", got, want)
	}

	// A demo too short to run the courier's order has nothing to retry.
	if got := exploreHint(f, "acme corp", ""); strings.Contains(got, "retry") {
		t.Errorf("no order to retry, yet:\n%s", got)
	}
}

// TestStayHint checks the commands "demo --stay" suggests: they reach the
// worker still running, at the address it listens on.
func TestStayHint(t *testing.T) {
	want := `
The console stays at http://127.0.0.1:8080/ until you press Ctrl-C; from another terminal, try:
  substate tenants list --sub-state failed
  substate executions describe cyberdyne
  substate executions retry cyberdyne --reason "the courier is back"
`
	if got := stayHint("http://"+defaultHTTPAddr, "cyberdyne"); got != want {
		t.Errorf("default address:\n%s\nwant\n%s", got, want)
	}
	want = `
The console stays at http://127.0.0.1:41234/ until you press Ctrl-C; from another terminal, try:
  substate tenants list --sub-state failed --server http://127.0.0.1:41234
`
	if got := stayHint("http://127.0.0.1:41234", ""); got != want {
		t.Errorf("other address, nothing to retry:\n%s\nwant\n%s", got, want)
	}
}
