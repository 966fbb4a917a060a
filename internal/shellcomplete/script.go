package shellcomplete

import (
	"fmt"
	"strings"
)

// Shells are the shells Script writes for.
var Shells = []string{"bash", "zsh", "fish"}

// Script returns the completion script of program prog for shell: a
// function that passes the line being completed to bin (how the shell
// runs the program: its name when the shell finds it on PATH, else a
// path) as "bin __complete LINE", and offers the words bin prints, one a
// line (a tab and a help text may follow a word); file names when it
// prints none.
func Script(shell, prog, bin string) (string, error) {
	var tmpl string
	switch shell {
	case "bash":
		tmpl = bashScript
	case "zsh":
		tmpl = zshScript
	case "fish":
		tmpl = fishScript
	default:
		return "", fmt.Errorf("shell %q: want bash, zsh or fish", shell)
	}
	fn := "_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, prog)
	r := strings.NewReplacer("PROG", quote(prog), "FUNC", fn, "BIN", quote(bin), "COMPLETE", Command)
	return r.Replace(tmpl), nil
}

// quote is s as one shell word, single-quoted unless it needs no quotes.
func quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// bash splits the word being completed at the characters of
// COMP_WORDBREAKS (= and : among them) and replaces only its last part,
// so the function sends the line up to the cursor whole and strips from
// each candidate what comes before that part.
const bashScript = `# bash completion for PROG. Load it in the shell:
#   source <(PROG completion bash)
# or keep it where bash-completion finds it:
#   PROG completion bash > ~/.local/share/bash-completion/completions/PROG
FUNC() {
    local line="${COMP_LINE:0:COMP_POINT}" cur="${COMP_WORDS[COMP_CWORD]}"
    local word="${line##*[[:blank:]]}"
    [[ "$cur" == [=:] ]] && cur=""
    local strip="${word%"$cur"}" c
    COMPREPLY=()
    while IFS= read -r c; do
        c="${c%%$'\t'*}"
        [[ -n "$c" ]] && COMPREPLY+=("${c#"$strip"}")
    done < <(BIN COMPLETE "$line" 2>/dev/null)
}
complete -o default -F FUNC PROG
`

const zshScript = `#compdef PROG
# zsh completion for PROG. Load it in the shell (after compinit):
#   source <(PROG completion zsh)
# or keep it as _PROG in a directory of $fpath.
compdef FUNC PROG
FUNC() {
    local -a out
    out=("${(@f)$(BIN COMPLETE "${(j: :)words[1,CURRENT]}" 2>/dev/null)}")
    out=("${(@)out%%$'\t'*}")
    out=(${out:#})
    if (( ${#out} )); then
        compadd -Q -- "${out[@]}"
    else
        _files
    fi
}
if [ "$funcstack[1]" = "FUNC" ]; then
    FUNC "$@"
fi
`

const fishScript = `# fish completion for PROG. Load it in the shell:
#   PROG completion fish | source
# or keep it as ~/.config/fish/completions/PROG.fish
function FUNC
    set -l tokens (commandline -opc) (commandline -ct)
    set -l out (BIN COMPLETE (string join ' ' -- (string escape -- $tokens)) 2>/dev/null)
    if test (count $out) -eq 0
        __fish_complete_path (commandline -ct)
    else
        printf '%s\n' $out
    end
end
complete -c PROG -f -a '(FUNC)'
`
