package main

import (
	"strings"
	"testing"
)

func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs its workflows in real time")
	}
	code, out, errOut := runCLI(t, "demo", "--tenants", "4", "--data-dir", t.TempDir(),
		"--http-addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0")
	if code != 0 {
		t.Fatalf("demo exited %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"backing-off", "→ succeeded", "→ failed", // moved through these live
		"Every tenant settled as expected", "succeeded 3  failed 4",
		"card declined",                   // the real error, not a fixed sentence
		"cancelled",                       // the killed Restate invocation
		"substate audit --tenant initech", // how to look around after it ended
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// TestExploreHint checks that the commands the demo suggests at its end
// reach the addresses it ran on.
func TestExploreHint(t *testing.T) {
	f := WorkerFlags{DataDir: "./data", HTTPAddr: defaultHTTPAddr}
	f.NATSListen = defaultNATSListen
	want := `
To look around, start the worker again on the demo's data, then ask it from another terminal:
  substate run --data-dir ./data
  substate tenants list --has-error
  substate audit --tenant initech
  substate verify
`
	if got := exploreHint(f, "initech"); got != want {
		t.Errorf("defaults:\n%s\nwant\n%s", got, want)
	}

	f = WorkerFlags{DataDir: "/tmp/my demo", HTTPAddr: "127.0.0.1:28080"}
	f.NATSListen = "127.0.0.1:24222"
	want = `
To look around, start the worker again on the demo's data, then ask it from another terminal:
  substate run --data-dir '/tmp/my demo' --http-addr 127.0.0.1:28080 --nats-listen 127.0.0.1:24222
  substate tenants list --has-error --server http://127.0.0.1:28080
  substate audit --tenant 'acme corp' --nats-url nats://127.0.0.1:24222
  substate verify --server http://127.0.0.1:28080 --nats-url nats://127.0.0.1:24222
`
	if got := exploreHint(f, "acme corp"); got != want {
		t.Errorf("other addresses:\n%s\nwant\n%s", got, want)
	}
}
