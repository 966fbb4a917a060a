package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// shellPath finds a shell the completion tests run; without it the test
// is skipped, and fails in CI (SUBSTATE_CI=1), which installs them.
func shellPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("SUBSTATE_CI") == "1" {
			t.Fatalf("%s is not installed: CI installs it (.ci/run)", name)
		}
		t.Skipf("%s is not installed", name)
	}
	return p
}

// substateOnPath links this test binary as "substate" in a fresh
// directory and returns it: with SUBSTATE_TEST_MAIN=1 (shellLines sets
// it) the binary runs main, as the real one does.
func substateOnPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(dir, "substate")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// completionScript is "substate completion SHELL" as the user gets it,
// with dir first on PATH.
func completionScript(t *testing.T, dir, shell string) string {
	t.Helper()
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	code, out, errOut := runCLI(t, "completion", shell)
	if code != 0 {
		t.Fatalf("completion %s: exit %d: %s", shell, code, errOut)
	}
	return out
}

// shellLines runs script in shell and returns its output lines.
func shellLines(t *testing.T, shell string, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, shell, args...)
	cmd.Env = append(os.Environ(), "SUBSTATE_TEST_MAIN=1")
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", shell, err, out)
	}
	return strings.Fields(string(out))
}

// TestCompletionBash loads "substate completion bash" into bash and asks
// it, as bash does on TAB, to complete partial lines.
func TestCompletionBash(t *testing.T) {
	bash := shellPath(t, "bash")
	dir := substateOnPath(t)
	script := completionScript(t, dir, "bash")
	if !strings.Contains(script, "complete -o default -F _substate substate") || !strings.Contains(script, "substate __complete") {
		t.Fatalf("the script does not complete substate by its name on PATH:\n%s", script)
	}
	file := filepath.Join(t.TempDir(), "substate.bash")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		words []string // COMP_WORDS as bash splits the line (at = and : too)
		want  []string
	}{
		{[]string{"substate", "ten"}, []string{"tenants"}},
		{[]string{"substate", "tenants", "l"}, []string{"list"}},
		{[]string{"substate", "tenants", "list", "--sub-st"}, []string{"--sub-state"}},
		{[]string{"substate", "version", "-o", ""}, []string{"table", "wide", "json", "yaml"}},
		{[]string{"substate", "version", "--output", "=", "y"}, []string{"yaml"}},
		{[]string{"substate", "completion", "z"}, []string{"zsh"}},
	} {
		t.Run(strings.Join(tc.words, " "), func(t *testing.T) {
			line := strings.Join(tc.words, " ")
			line = strings.ReplaceAll(line, " = ", "=")
			var quoted []string
			for _, w := range tc.words {
				quoted = append(quoted, "'"+w+"'")
			}
			prog := "source '" + file + "'\n" +
				"COMP_WORDS=(" + strings.Join(quoted, " ") + ")\n" +
				"COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n" +
				"COMP_LINE='" + line + "'\nCOMP_POINT=${#COMP_LINE}\n" +
				"_substate\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
			got := shellLines(t, bash, "--norc", "-c", prog)
			if !slices.Equal(got, tc.want) {
				t.Errorf("COMPREPLY = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCompletionZsh loads "substate completion zsh" after compinit and
// runs its function as zsh's completion system would, with compadd
// printing the words it is given (after its options -Q --).
func TestCompletionZsh(t *testing.T) {
	zsh := shellPath(t, "zsh")
	dir := substateOnPath(t)
	file := filepath.Join(t.TempDir(), "substate.zsh")
	if err := os.WriteFile(file, []byte(completionScript(t, dir, "zsh")), 0o644); err != nil {
		t.Fatal(err)
	}
	prog := "autoload -U compinit && compinit -u -D\nsource '" + file + "'\n" +
		"[[ ${_comps[substate]} == _substate ]] || print registered-as=${_comps[substate]}\n" +
		"compadd() { print -l -- \"${@:3}\" }\n" +
		"words=(substate ten); CURRENT=2; _substate\n" +
		"words=(substate tenants list --has); CURRENT=4; _substate\n"
	got := shellLines(t, zsh, "-f", "-c", prog)
	if want := []string{"tenants", "--has-error"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestCompletionFish loads "substate completion fish" into fish and asks
// fish to complete lines (complete -C), as it does on TAB.
func TestCompletionFish(t *testing.T) {
	fish := shellPath(t, "fish")
	dir := substateOnPath(t)
	file := filepath.Join(t.TempDir(), "substate.fish")
	if err := os.WriteFile(file, []byte(completionScript(t, dir, "fish")), 0o644); err != nil {
		t.Fatal(err)
	}
	got := shellLines(t, fish, "--no-config", "-c", "source '"+file+"'; complete -C 'substate ten'; complete -C 'substate version -o y'")
	if want := []string{"tenants", "Query", "the", "tenant", "view", "of", "a", "running", "worker", "yaml"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "substate ") || !strings.Contains(out, "(commit ") {
		t.Errorf("--version: exit %d: %q", code, out)
	}
	code, out, _ = runCLI(t, "version", "-o", "json")
	if code != 0 || !strings.Contains(out, `"goVersion": "go`) || !strings.Contains(out, `"commit": "`) {
		t.Errorf("version -o json: exit %d: %q", code, out)
	}
	code, out, _ = runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "version ") || !strings.Contains(out, "\ncommit ") {
		t.Errorf("version: exit %d: %q", code, out)
	}
	// A deployment's own SUBSTATE_VERSION is not --version.
	t.Setenv("SUBSTATE_VERSION", "1.2.3")
	code, out, _ = runCLI(t, "completion", "bash")
	if code != 0 || !strings.Contains(out, "complete -o default") {
		t.Errorf("completion bash with SUBSTATE_VERSION set: exit %d: %q", code, out)
	}
}
