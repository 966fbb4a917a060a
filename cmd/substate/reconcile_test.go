package main

import (
	"strings"
	"testing"

	"github.com/substatehq/substate/testkit/awstest"
)

// "substate run" refuses reconciler flags it cannot honour, from the
// command line or the environment, exiting 1 with the reason.
func TestRunReconcileFlags(t *testing.T) {
	awstest.Env(t, "http://127.0.0.1:1", "")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--sfn-reconcile", "on"}, "no AWS region"},
		{[]string{"--reconcile-after=-1s"}, "--reconcile-after must not be negative"},
		{[]string{"--sfn-redrive-check-interval=-1h"}, "--sfn-redrive-check-interval must not be negative"},
		{[]string{"--restate-services", "Provision"}, "--restate-services needs --restate-admin-url"},
		{[]string{"--restate-admin-url", "restate:9070"}, "not an http(s) URL"},
	} {
		args := append([]string{"run", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0"}, tt.args...)
		code, _, errOut := runBinary(t, args...)
		if code != 1 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, %s; want 1 and %q", tt.args, code, errOut, tt.want)
		}
	}
	t.Setenv("SUBSTATE_RECONCILE_INTERVAL", "-1s")
	code, _, errOut := runBinary(t, "run", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "--reconcile-interval must be positive") {
		t.Errorf("SUBSTATE_RECONCILE_INTERVAL=-1s: exit %d, %s", code, errOut)
	}
}
