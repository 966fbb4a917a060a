package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/substatehq/substate/engine/demo"
)

func TestWorkflowValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "order.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, demo.Workflow, 0o644); err != nil {
		t.Fatal(err)
	}
	broken := "name: broken\nversion: \"1\"\nstartAt: Start\nstates:\n  Start:\n    type: Task\n    resource: svc.op\n    next: Missing\n  Done:\n    type: Success\n"
	if err := os.WriteFile(bad, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, "workflow", "validate", good)
	if code != 0 || !strings.Contains(out, good+": ok") {
		t.Fatalf("valid file: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "workflow", "validate", good, bad)
	if want := bad + `:8:11: state "Start": next state "Missing" does not exist`; code != 1 || !strings.Contains(out, want) {
		t.Fatalf("broken file: exit %d, want 1 and %q in\n%s", code, want, out)
	}
	t.Run("RelativePath", func(t *testing.T) {
		t.Chdir(dir)
		code, out, _ := runCLI(t, "workflow", "validate", "bad.yaml")
		if want := "\nbad.yaml:8:11: state \"Start\": "; code != 1 || !strings.Contains("\n"+out, want) {
			t.Fatalf("exit %d, want 1 and the path as given, %q, in\n%s", code, want, out)
		}
	})
	t.Run("ErrMissingFile", func(t *testing.T) {
		code, out, _ := runCLI(t, "workflow", "validate", good, filepath.Join(dir, "nope.yaml"))
		if code != 1 || !strings.Contains(out, "nope.yaml") || !strings.Contains(out, good+": ok") {
			t.Fatalf("exit %d, want 1, the good file ok and the missing one named:\n%s", code, out)
		}
	})
}

func TestWorkflowStartOnEngine(t *testing.T) {
	w := startWorker(t, t.TempDir())
	svc, err := demo.Register(w.Bus.Conn)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	file := filepath.Join(t.TempDir(), "order.yaml")
	if err := os.WriteFile(file, demo.Workflow, 0o644); err != nil {
		t.Fatal(err)
	}
	s := demo.Scenarios[1] // backorder: fails without retries
	args := []string{"workflow", "start", file, "--tenant", s.TenantID, "--input", string(s.Input), "--name", s.Name, "--nats-url", w.Bus.ClientURL()}
	code, out, errOut := runCLI(t, args...)
	if code != 0 || !strings.Contains(out, "started "+s.Name) {
		t.Fatalf("start: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, args...)
	if code != 0 || !strings.Contains(out, "already started "+s.Name) {
		t.Fatalf("second start: exit %d\n%s", code, out)
	}
	eventually(t, func() string {
		code, out, _ := runCLI(t, "tenants", "get", s.TenantID, "--server", w.HTTP.URL(), "--json")
		if code != 0 || !strings.Contains(out, `"workflowSubState": "failed"`) || !strings.Contains(out, `"provider": "engine"`) {
			return fmt.Sprintf("tenant %s: %s", s.TenantID, out)
		}
		return ""
	})
	code, _, errOut = runCLI(t, "workflow", "start", file, "--tenant", "x", "--input", "[1]", "--nats-url", w.Bus.ClientURL())
	if code != 1 || !strings.Contains(errOut, "JSON object") {
		t.Fatalf("bad input: exit %d %s", code, errOut)
	}
}
