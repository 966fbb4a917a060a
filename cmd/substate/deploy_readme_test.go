package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/substatehq/substate"
)

// commandLine matches a substate command in a README code block, as the
// installed binary or with go run.
var commandLine = regexp.MustCompile(`^(?:\$ )?(?:substate|go run \./cmd/substate) ((?:run|demo|tenants|events|executions|audit|verify|rebuild|renormalize|bench|soak|deploy)\b.*)$`)

// The READMEs show commands and name flags and variables that exist: each
// command in a code block parses, and each `--flag` and SUBSTATE_ name in
// the text is some command's.
func TestReadmes(t *testing.T) {
	for _, path := range []string{filepath.Join(deployDir, "README.md"), "../../README.md"} {
		t.Run(strings.TrimPrefix(path, "../../"), func(t *testing.T) { checkReadme(t, path) })
	}
}

func checkReadme(t *testing.T, path string) {
	_, names := cliFlags(t, "run")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SUBSTATE_INGEST_API_KEY", "k") // some examples read it
	inBlock, commands, pending := false, 0, ""
	for l := range strings.Lines(string(b)) {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock && strings.HasSuffix(l, "\\") {
			pending += strings.TrimSuffix(l, "\\")
			continue
		}
		l, pending = pending+l, ""
		if m := commandLine.FindStringSubmatch(l); inBlock && m != nil {
			commands++
			if _, err := parseCLI(shellWords(m[1])); err != nil {
				t.Errorf("%s: substate %s: %v", path, m[1], err)
			}
		}
		if inBlock {
			continue
		}
		for _, span := range codeSpan.FindAllString(l, -1) {
			for _, m := range flagName.FindAllStringSubmatch(span, -1) {
				if !names[m[1]] {
					t.Errorf("%s names --%s, which no substate command has", path, m[1])
				}
			}
		}
	}
	if commands == 0 {
		t.Errorf("%s shows no substate command", path)
	}
	envs := allEnvs(t)
	for _, name := range regexp.MustCompile(`SUBSTATE_[A-Z0-9][A-Z0-9_]*`).FindAllString(string(b), -1) {
		if !envs[name] && !streams[name] {
			t.Errorf("%s names %s, which is no flag's variable and no stream", path, name)
		}
	}
}

// codeSpan is a `code span` of Markdown text, and flagName a flag in one.
var (
	codeSpan = regexp.MustCompile("`[^`]+`")
	flagName = regexp.MustCompile("(?:^|[\\s`\\[(|])--([a-z][a-z0-9-]*)")
)

// streams are the stream names, which look like variables.
var streams = map[string]bool{substate.StreamRaw: true, substate.StreamEvents: true, substate.StreamDLQ: true, substate.StreamChanges: true, substate.StreamAudit: true}

// allEnvs returns the environment variables of every command's flags.
func allEnvs(t *testing.T) map[string]bool {
	t.Helper()
	parser, err := newParser(&CLI{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, f := range n.Flags {
			for _, e := range f.Envs {
				out[e] = true
			}
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(parser.Model.Node)
	return out
}

// shellWords splits a command line into words as a shell does for the
// simple lines of a README: blanks separate, quotes group, # starts a
// comment.
func shellWords(s string) []string {
	var out []string
	var word strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			word.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '#' && !inWord:
			return out
		case r == ' ' || r == '\t':
			if inWord {
				out, inWord = append(out, word.String()), false
				word.Reset()
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, word.String())
	}
	return out
}
