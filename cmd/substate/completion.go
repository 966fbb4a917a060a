package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/alecthomas/kong"

	"github.com/substatehq/substate/internal/shellcomplete"
)

// CompletionCmd is "substate completion SHELL".
type CompletionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" help:"The shell: bash, zsh or fish."`
}

// Help says how to load the script.
func (c *CompletionCmd) Help() string {
	return `Print the script that completes substate's commands, flags and flag values in the shell.

  bash:  source <(substate completion bash)
         or: substate completion bash > ~/.local/share/bash-completion/completions/substate
  zsh:   source <(substate completion zsh)      (after compinit)
         or: substate completion zsh > "${fpath[1]}/_substate"
  fish:  substate completion fish | source
         or: substate completion fish > ~/.config/fish/completions/substate.fish

The script asks this binary for the words that fit the line being typed; it names the binary
"substate" when the shell finds this one on PATH under that name, else by its absolute path.`
}

// Run prints the script.
func (c *CompletionCmd) Run(m *Main) error {
	s, err := shellcomplete.Script(c.Shell, "substate", selfCommand())
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(m.Stdout, s)
	return err
}

// selfCommand is how a shell runs this binary: "substate" when PATH finds
// this very file under that name, else its absolute path.
func selfCommand() string {
	self, err := os.Executable()
	if err != nil {
		return "substate"
	}
	if found, err := exec.LookPath("substate"); err == nil && sameFile(found, self) {
		return "substate"
	}
	if abs, err := filepath.Abs(self); err == nil {
		return abs
	}
	return self
}

func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// complete prints the completions of a command line (shellcomplete.Command).
func (m *Main) complete(model *kong.Node, line string) int {
	words := shellcomplete.Split(line)
	if len(words) > 0 {
		words = words[1:] // the program's name
	}
	for _, c := range shellcomplete.Candidates(model, words) {
		if c.Help != "" {
			fmt.Fprintf(m.Stdout, "%s\t%s\n", c.Word, c.Help)
		} else {
			fmt.Fprintln(m.Stdout, c.Word)
		}
	}
	return 0
}
