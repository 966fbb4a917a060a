// Package shellcomplete completes a kong command line in bash, zsh and
// fish. The script a shell loads (Script) hands the line being typed to
// the program itself, which answers with the candidates its kong model
// allows (Candidates): subcommands, flags, and the values of enum flags
// and arguments. A value kong does not enumerate gets no candidate, and
// the shell offers file names instead. Nothing is installed into a
// shell's start-up files: the user puts the script where the shell loads
// it, as kubectl's and nats's are.
package shellcomplete

import (
	"slices"
	"strings"

	"github.com/alecthomas/kong"
)

// Command is the hidden argument that asks a program for candidates:
// "substate __complete 'substate tenants li'".
const Command = "__complete"

// Candidate is one completion: the word, and for shells that show it what
// it does (the first sentence of its help, on one line).
type Candidate struct {
	Word, Help string
}

// summary is the first sentence of help, on one line, at most 80 runes.
func summary(help string) string {
	help = strings.Join(strings.Fields(help), " ")
	if i := strings.Index(help, ". "); i >= 0 {
		help = help[:i]
	}
	help = strings.TrimSuffix(help, ".")
	if r := []rune(help); len(r) > 80 {
		help = string(r[:79]) + "…"
	}
	return help
}

// Candidates returns the completions of the last of words (which may be
// empty: a line ending in a space) in the command tree under root; words
// are the line's words after the program's name.
func Candidates(root *kong.Node, words []string) []Candidate {
	if len(words) == 0 {
		words = []string{""}
	}
	node, pos, pending := walk(root, words[:len(words)-1])
	cur := words[len(words)-1]
	switch {
	case pending != nil:
		return values(pending.Value, "", cur)
	case strings.HasPrefix(cur, "-"):
		if name, val, ok := strings.Cut(cur, "="); ok {
			if f := findFlag(node, name); f != nil {
				return values(f.Value, name+"=", val)
			}
			return nil
		}
		return flags(node, cur)
	}
	var out []Candidate
	for _, c := range node.Children {
		if !c.Hidden && strings.HasPrefix(c.Name, cur) {
			out = append(out, Candidate{Word: c.Name, Help: summary(c.Help)})
		}
	}
	if pos < len(node.Positional) {
		out = append(out, values(node.Positional[pos], "", cur)...)
	}
	return out
}

// walk follows the completed words down the command tree: the command
// they select, how many of its positional arguments they fill, and the
// flag whose value comes next, if any.
func walk(root *kong.Node, words []string) (node *kong.Node, pos int, pending *kong.Flag) {
	node = root
	rest := false // after "--", every word is an argument
	for _, w := range words {
		switch {
		case pending != nil:
			pending = nil
		case w == "--" && !rest:
			rest = true
		case strings.HasPrefix(w, "-") && len(w) > 1 && !rest:
			name, _, hasValue := strings.Cut(w, "=")
			if f := findFlag(node, name); f != nil && !hasValue && !f.IsBool() && !f.IsCounter() {
				pending = f
			}
		default:
			if c := findChild(node, w); c != nil && !rest {
				node, pos = c, 0
				continue
			}
			pos++
		}
	}
	return node, pos, pending
}

// findChild returns the command of node named or aliased w.
func findChild(node *kong.Node, w string) *kong.Node {
	for _, c := range node.Children {
		if c.Type == kong.CommandNode && (c.Name == w || slices.Contains(c.Aliases, w)) {
			return c
		}
	}
	return nil
}

// findFlag returns the flag "--name" or "-s" of node or of a command above
// it (kong takes those anywhere below them).
func findFlag(node *kong.Node, arg string) *kong.Flag {
	for n := node; n != nil; n = n.Parent {
		for _, f := range n.Flags {
			if arg == "--"+f.Name || f.Short != 0 && arg == "-"+string(f.Short) || slices.ContainsFunc(f.Aliases, func(a string) bool { return arg == "--"+a }) {
				return f
			}
		}
	}
	return nil
}

// flags returns the flags of node and the commands above it that start
// with prefix, the nearest command's first.
func flags(node *kong.Node, prefix string) []Candidate {
	var out []Candidate
	seen := map[string]bool{}
	for n := node; n != nil; n = n.Parent {
		for _, f := range n.Flags {
			name := "--" + f.Name
			if f.Hidden || seen[name] || !strings.HasPrefix(name, prefix) {
				continue
			}
			seen[name] = true
			out = append(out, Candidate{Word: name, Help: summary(f.Help)})
		}
	}
	return out
}

// values returns the values of v that start with prefix, each after
// before ("--output=" for a value completed inside its flag's word); none
// when kong does not enumerate them.
func values(v *kong.Value, before, prefix string) []Candidate {
	if v == nil || v.Enum == "" {
		return nil
	}
	var out []Candidate
	for _, e := range v.EnumSlice() {
		if e != "" && strings.HasPrefix(e, prefix) {
			out = append(out, Candidate{Word: before + e})
		}
	}
	return out
}
