package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"go.yaml.in/yaml/v4"

	"github.com/substatehq/substate/worker"
)

// The tests in this file keep deploy/ honest: every YAML file parses, and
// every flag, SUBSTATE_* variable, probe path and command line the
// manifests, the example config, the systemd unit and deploy/README.md
// name is one the binary has, with a value it accepts.

const deployDir = "../../deploy"

// parseCLI parses args as Main does, without running the command, and
// returns the parsed command tree.
func parseCLI(args []string) (*CLI, error) {
	var cli CLI
	parser, err := newParser(&cli)
	if err != nil {
		return nil, err
	}
	_, err = parser.Parse(args)
	return &cli, err
}

func newParser(cli *CLI) (*kong.Kong, error) {
	return kong.New(cli, kong.Name("substate"), kong.DefaultEnvars("SUBSTATE"),
		kong.Exit(func(int) { panic("exit during a dry parse") }))
}

// cliFlags lists the flags of the command at path ("run", "deploy
// eventbridge"…) by environment variable, and the long flag names of every
// command (with their --no- forms).
func cliFlags(t *testing.T, path string) (envs map[string]*kong.Flag, names map[string]bool) {
	t.Helper()
	parser, err := newParser(&CLI{})
	if err != nil {
		t.Fatal(err)
	}
	envs, names = map[string]*kong.Flag{}, map[string]bool{}
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, f := range n.Flags {
			names[f.Name] = true
			if f.Tag.Negatable != "" {
				names["no-"+f.Name] = true
			}
			if n.FullPath() == "substate "+path {
				for _, e := range f.Envs {
					envs[e] = f
				}
			}
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(parser.Model.Node)
	if len(envs) == 0 {
		t.Fatalf("no command %q", path)
	}
	return envs, names
}

// yamlDocs decodes every document of a YAML file into a new T.
func yamlDocs[T any](t *testing.T, path string) []T {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []T
	for {
		var v T
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
}

func TestDeployYAMLParses(t *testing.T) {
	n := 0
	err := filepath.WalkDir(deployDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			n++
			if docs := yamlDocs[yaml.Node](t, path); len(docs) == 0 {
				t.Errorf("%s: no YAML document", path)
			}
		}
		return err
	})
	if err != nil || n == 0 {
		t.Fatalf("walk %s: %v, %d files", deployDir, err, n)
	}
}

// setEnv sets the variables for the rest of the (sub)test, refusing any
// SUBSTATE_* name that is no flag of the command.
func setEnv(t *testing.T, known map[string]*kong.Flag, where string, env map[string]string) {
	t.Helper()
	for k, v := range env {
		if strings.HasPrefix(k, "SUBSTATE_") && known[k] == nil {
			t.Errorf("%s sets %s, which is no flag's variable", where, k)
		}
		t.Setenv(k, v)
	}
}

// dryRun parses a "substate run" command line in the current environment.
func dryRun(t *testing.T, where string, args []string) *worker.Flags {
	t.Helper()
	cli, err := parseCLI(args)
	if err != nil {
		t.Fatalf("%s: substate %s: %v", where, strings.Join(args, " "), err)
	}
	return &cli.Run.Flags
}

func TestEnvExample(t *testing.T) {
	known, _ := cliFlags(t, "run")
	path := filepath.Join(deployDir, "config", "substate.env.example")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := regexp.MustCompile(`^#?(SUBSTATE_[A-Z0-9_]+)=(.*)$`)
	env := map[string]string{}
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if m := line.FindStringSubmatch(sc.Text()); m != nil {
			if known[m[1]] != nil && known[m[1]].Tag.Type == "existingfile" {
				m[2] = path // the example's paths need not exist here
			}
			env[m[1]] = m[2]
		}
	}
	for e, fl := range known {
		if _, ok := env[e]; !ok {
			t.Errorf("%s does not describe --%s (%s)", path, fl.Name, e)
		}
	}
	setEnv(t, known, path, env)
	dryRun(t, path, []string{"run"})
}

func TestSystemdUnit(t *testing.T) {
	known, _ := cliFlags(t, "run")
	path := filepath.Join(deployDir, "systemd", "substate.service")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env, args := map[string]string{}, []string(nil)
	for l := range strings.Lines(string(b)) {
		l = strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(l, "Environment="); ok {
			k, v, _ := strings.Cut(v, "=")
			env[k] = v
		}
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			args = strings.Fields(v)[1:]
		}
	}
	if len(args) == 0 || args[0] != "run" {
		t.Fatalf("%s: ExecStart does not run the worker: %v", path, args)
	}
	setEnv(t, known, path, env)
	if f := dryRun(t, path, args); f.DataDir != "/var/lib/substate" || !strings.Contains(string(b), "StateDirectory=substate") {
		t.Errorf("%s: data dir %s is not the StateDirectory", path, f.DataDir)
	}
}

func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if goVersion == nil || !bytes.Contains(b, []byte("FROM golang:"+string(goVersion[1])+" ")) {
		t.Errorf("deploy/Dockerfile does not build with the go.mod's Go %s", goVersion[1])
	}
	if !bytes.Contains(b, []byte(`ENTRYPOINT ["/usr/local/bin/substate"]`)) {
		t.Error("deploy/Dockerfile: the entry point is not the binary, as the manifests' args expect")
	}
}

// sizeBytes parses a NATS size such as "<< 2MB >>" (1024-based, as the
// server reads MB).
func sizeBytes(s string) int64 {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s), "<<"), ">>"))
	mult := map[string]int64{"": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		i = len(s)
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	m, ok := mult[strings.ToUpper(s[i:])]
	if err != nil || !ok {
		return -1
	}
	return n * m
}
