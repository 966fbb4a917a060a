package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/substatehq/substate/testkit/restatetest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/tools/bench"
)

// TestGuides runs every shell command of README.md and deploy/README.md,
// as written, in order, against local workers: each must exit 0, and
// where the guide shows the output under a command (its "# " lines), the
// output must have that shape. A guide that drifts from the binary fails
// here. What cannot run on this machine (a cluster, an AWS account, root)
// is replaced by its local stand-in, all of them in one table:
// localStandIns in guides_standins_test.go.
func TestGuides(t *testing.T) {
	if testing.Short() {
		t.Skip("runs workers, the demo, a Restate server and the AWS protocol server")
	}
	for _, path := range []string{"README.md", "deploy/README.md"} {
		t.Run(path, func(t *testing.T) {
			g := newGuide(t)
			for _, c := range guideCommands(t, filepath.Join("..", "..", path)) {
				g.run(c)
			}
			for _, check := range g.finally {
				check()
			}
		})
	}
}

// guideCommand is one command of a guide's shell block and the output the
// guide shows under it.
type guideCommand struct {
	where string   // file:line
	text  string   // the command, its continuation lines joined
	want  []string // the "# " lines under it, without the "# "
}

// guideCommands returns the commands of the ```sh blocks of a guide.
func guideCommands(t *testing.T, path string) []guideCommand {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []guideCommand
	inBlock, open, pending := false, false, ""
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "```"):
			inBlock, open = l == "```sh" && !inBlock, false
		case !inBlock:
		case l == "":
			open = false
		case strings.HasPrefix(l, "#"):
			if open {
				out[len(out)-1].want = append(out[len(out)-1].want, strings.TrimSpace(strings.TrimPrefix(l, "#")))
			}
		case strings.HasSuffix(l, "\\"):
			pending += strings.TrimSuffix(l, "\\")
		default:
			out = append(out, guideCommand{where: fmt.Sprintf("%s:%d", strings.TrimPrefix(path, "../../"), i+1), text: pending + l})
			open, pending = true, ""
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no shell command", path)
	}
	return out
}

// guide is the machine a guide's commands run on: a working directory
// with the repository's examples and deploy folders, substate (this test
// binary) and the example programs on PATH, and the local workers.
type guide struct {
	t      *testing.T
	dir    string // where the commands run
	bin    string // on PATH: substate, alerting
	http   string // the worker's HTTP address
	nats   string // its embedded NATS server's client address
	worker *background
	// What stand-ins started or left: the Restate server, the values of
	// the cluster's Secret, checks for the end of the guide.
	restate *restatetest.Server
	secrets []string
	finally []func()
}

func newGuide(t *testing.T) *guide {
	g := &guide{t: t, dir: t.TempDir(), bin: t.TempDir(), http: workertest.FreeAddr(t), nats: workertest.FreeAddr(t)}
	for _, d := range []string{"examples", "deploy"} {
		if err := os.Symlink(filepath.Join(repoRoot(t), d), filepath.Join(g.dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	script := fmt.Sprintf("#!/bin/sh\nSUBSTATE_TEST_MAIN=1 exec %q -test.run='^$' -- \"$@\"\n", os.Args[0])
	if err := os.WriteFile(filepath.Join(g.bin, "substate"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(g.bin, "alerting"), "./examples/alerting")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/alerting: %v\n%s", err, out)
	}
	t.Cleanup(g.stopWorker)
	return g
}

// envWith returns the environment of a command: the test's, without its
// SUBSTATE_ settings, with the programs on PATH.
func (g *guide) envWith() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SUBSTATE_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return append(env, "PATH="+g.bin+":"+os.Getenv("PATH"))
}

// repoRoot is the repository's root directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// run runs one command of the guide, or its stand-in.
func (g *guide) run(c guideCommand) {
	g.t.Helper()
	text := goRun.ReplaceAllStringFunc(c.text, func(s string) string { return goRunAs[strings.TrimSpace(s)] + " " })
	s := standInFor(text)
	if s != nil && s.skip != "" {
		g.t.Logf("%s: not run here (%s): %s", c.where, s.skip, c.text)
		return
	}
	env := g.envWith()
	if s != nil && s.prepare != nil {
		text, env = s.prepare(g, text, env)
	}
	if s != nil && s.instead != nil {
		s.instead(g, c)
		return
	}
	text = g.local(text)
	switch {
	case strings.HasPrefix(text, "substate run ") || text == "substate run" || strings.HasPrefix(text, "substate run\t"):
		g.startWorker(c, text, env)
	case follows(text):
		g.follow(c, text, env)
	default:
		g.foreground(c, text, env)
	}
}

// goRun is "go run" of one of the repository's programs, and goRunAs what
// runs instead: the built program on PATH.
var (
	goRun   = regexp.MustCompile(`^go run \./(cmd/substate|examples/alerting)\s`)
	goRunAs = map[string]string{"go run ./cmd/substate": "substate", "go run ./examples/alerting": "alerting"}
)

// local points the addresses a guide writes (the defaults: the worker on
// 127.0.0.1:8080, its NATS server on 4222, and the cluster's forwarded
// ports) at the local worker's.
func (g *guide) local(text string) string {
	return strings.NewReplacer(
		"http://127.0.0.1:8080", "http://"+g.http, "127.0.0.1:8080", g.http,
		"http://localhost:8080", "http://"+g.http, "localhost:8080", g.http,
		"http://localhost:8081", "http://"+g.http, "localhost:8081", g.http,
		"nats://127.0.0.1:4222", "nats://"+g.nats,
	).Replace(text)
}

// clientEnv points a client command without an address at the local
// worker, as the defaults point at a worker on the default ports: the
// commands that read the streams at its NATS server, the others at its
// HTTP API.
func (g *guide) clientEnv(text string, env []string) []string {
	if regexp.MustCompile(`^substate (events|audit)\b`).MatchString(text) {
		return append(env, "SUBSTATE_NATS_URL=nats://"+g.nats)
	}
	return append(env, "SUBSTATE_SERVER=http://"+g.http)
}

// follows reports whether a command runs until interrupted: a program
// that serves (the alerting example), a tail without an idle timeout.
func follows(text string) bool {
	return strings.HasPrefix(text, "alerting ") ||
		(strings.HasPrefix(text, "substate events tail") && !strings.Contains(text, "--idle-timeout"))
}

// rereadable matches the commands that only read: run again until their
// output has the shape the guide shows, while the worker catches up.
var rereadable = regexp.MustCompile(`^substate (tenants|events|audit)\b`)

// foreground runs a command to its end: it must exit 0 with the output the
// guide shows.
func (g *guide) foreground(c guideCommand, text string, env []string) {
	g.t.Helper()
	env = g.clientEnv(text, env)
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, out := g.bash(text, env, 3*time.Minute)
		miss := shapeMiss(out, c.want)
		switch {
		case code == 0 && miss == "":
			return
		case code == 0 && rereadable.MatchString(text) && time.Now().Before(deadline):
			time.Sleep(time.Second)
			continue
		case code != 0:
			g.t.Fatalf("%s: %s\nexited with %d:\n%s", c.where, text, code, out)
		default:
			g.t.Fatalf("%s: %s\nthe output has no line like %q (the guide's %q):\n%s", c.where, text, miss, strings.Join(c.want, "\n"), out)
		}
	}
}

// bash runs text with bash -c in the guide's directory and returns its
// exit status and its output (stdout and stderr).
func (g *guide) bash(text string, env []string, limit time.Duration) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", text)
	cmd.Dir, cmd.Env = g.dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	} else if err != nil {
		return -1, err.Error()
	}
	return 0, out.String()
}

// background is a command left running: a worker, a follower.
type background struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

// start starts text with bash in the background.
func (g *guide) start(text string, env []string) *background {
	g.t.Helper()
	cmd := exec.Command("bash", "-c", "exec "+text)
	cmd.Dir, cmd.Env = g.dir, env
	bench.DieWithParent(cmd)
	b := &background{cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = b.out, b.out
	if err := cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	go func() { b.err = cmd.Wait(); close(b.done) }()
	return b
}

// stop interrupts b, as Ctrl-C would, and waits for it to exit.
func (b *background) stop() {
	select {
	case <-b.done:
		return
	default:
	}
	_ = b.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
}

// exited reports whether b has exited.
func (b *background) exited() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// startWorker starts "substate run" in the background, on the local
// worker's addresses, in place of the one running before (as a reader of
// the guide stops one to start the next), and waits until it is ready.
func (g *guide) startWorker(c guideCommand, text string, env []string) {
	g.t.Helper()
	g.stopWorker()
	env = append(env, "SUBSTATE_HTTP_ADDR="+g.http, "SUBSTATE_NATS_LISTEN="+g.nats, "SUBSTATE_LOG_LEVEL=warn")
	g.worker = g.start(text, env)
	g.waitReady(c, text)
}

// waitReady waits until the worker at g.http answers /readyz.
func (g *guide) waitReady(c guideCommand, text string) {
	g.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get("http://" + g.http + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if g.worker.exited() || time.Now().After(deadline) {
			g.t.Fatalf("%s: %s\nthe worker did not become ready (exited: %v, %v):\n%s", c.where, text, g.worker.exited(), g.worker.err, g.worker.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (g *guide) stopWorker() {
	if g.worker != nil {
		g.worker.stop()
		g.worker = nil
	}
}

// follow runs a command that runs until interrupted for a few seconds: it
// must still be running then (or have ended with status 0), and it is
// interrupted.
func (g *guide) follow(c guideCommand, text string, env []string) {
	g.t.Helper()
	b := g.start(text, g.clientEnv(text, env))
	select {
	case <-b.done:
	case <-time.After(3 * time.Second):
	}
	if b.exited() && b.err != nil {
		g.t.Fatalf("%s: %s\nexited early: %v\n%s", c.where, text, b.err, b.out.String())
	}
	b.stop()
	if miss := shapeMiss(b.out.String(), c.want); miss != "" {
		g.t.Fatalf("%s: %s\nthe output has no line like %q:\n%s", c.where, text, miss, b.out.String())
	}
}

// readAll returns a response's body, closing it.
func readAll(resp *http.Response) []byte {
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return b.Bytes()
}

// shapeMiss returns the first line of want that no line of out has the
// shape of, "" when every one has. A JSON line is matched by its keys, a
// status line ("HTTP/1.1 202 Accepted") and a table header exactly,
// another line by its words: every word without a digit (a tenant, a
// sub-state, a message), and the key of every key=value, in order on one
// line. Times, counts, ids and the guide's "…" vary, and are not checked.
func shapeMiss(out string, want []string) string {
	lines := strings.Split(strings.ReplaceAll(out, "\r", ""), "\n")
	for _, w := range want {
		if w == "" || w == "…" {
			continue
		}
		if !slices.ContainsFunc(lines, func(l string) bool { return sameShape(l, w) }) {
			return w
		}
	}
	return ""
}

// sameShape reports whether an output line has the shape of a guide's.
func sameShape(line, want string) bool {
	line = strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(want, "{"):
		return jsonShape(line) != "" && jsonShape(line) == jsonShape(want)
	case strings.HasPrefix(want, "HTTP/"):
		return line == want
	case header.MatchString(want):
		return slices.Equal(strings.Fields(line), strings.Fields(want))
	}
	at := 0
	for _, w := range words(want) {
		i := strings.Index(line[at:], w)
		if i < 0 {
			return false
		}
		at += i + len(w)
	}
	return true
}

// header is a table header: words in capitals.
var header = regexp.MustCompile(`^[A-Z][A-Z-]*(\s+[A-Z][A-Z-]*)+$`)

// words returns the words of a guide's output line that every run prints
// alike.
func words(line string) []string {
	var out []string
	for _, f := range strings.Fields(line) {
		if k, _, ok := strings.Cut(f, "="); ok {
			out = append(out, k+"=")
			continue
		}
		f = strings.Trim(f, `"'(),;:`)
		if f == "" || f == "…" || f == "-" || strings.ContainsAny(f, "0123456789…") {
			continue
		}
		out = append(out, f)
	}
	return out
}

// jsonShape returns the keys of a JSON object, nested objects' and the
// first array element's with them; "" when s is not a JSON object.
func jsonShape(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return ""
	}
	if _, ok := v.(map[string]any); !ok {
		return ""
	}
	var shape func(v any) string
	shape = func(v any) string {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k, e := range x {
				keys = append(keys, k+shape(e))
			}
			sort.Strings(keys)
			return "{" + strings.Join(keys, ",") + "}"
		case []any:
			if len(x) > 0 {
				return "[" + shape(x[0]) + "]"
			}
			return "[]"
		}
		return ""
	}
	return shape(v)
}
