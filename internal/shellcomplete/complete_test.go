package shellcomplete

import (
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

type testCLI struct {
	Verbose bool `short:"v" help:"Say more. Much more."`
	Tenants struct {
		List struct {
			SubState string `enum:"running,waiting,backing-off," default:"" help:"Only tenants in this sub-state."`
			Sort     string `enum:"retryCount:desc,updatedAt:desc" default:"retryCount:desc"`
			Output   string `short:"o" enum:"table,json" default:"table"`
			Limit    int
			All      bool
		} `cmd:"" help:"List tenants."`
		Get struct {
			ID string `arg:""`
		} `cmd:""`
	} `cmd:"" aliases:"t"`
	Completion struct {
		Shell string `arg:"" enum:"bash,zsh,fish"`
	} `cmd:""`
	Secret struct{} `cmd:"" hidden:""`
}

func words(cs []Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Word)
	}
	return out
}

func TestCandidates(t *testing.T) {
	var cli testCLI
	k, err := kong.New(&cli)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"prog ten", []string{"tenants"}},
		{"prog ", []string{"tenants", "completion"}},
		{"prog tenants ", []string{"list", "get"}},
		{"prog t l", []string{"list"}},
		{"prog tenants list --s", []string{"--sub-state", "--sort"}},
		{"prog tenants list --sub-state ", []string{"running", "waiting", "backing-off"}},
		{"prog tenants list --sub-state b", []string{"backing-off"}},
		{"prog tenants list --sub-state=w", []string{"--sub-state=waiting"}},
		{"prog tenants list --sort retryCount:", []string{"retryCount:desc"}},
		{"prog tenants list -o j", []string{"json"}},
		{"prog tenants list --all ", nil},
		{"prog tenants list --limit ", nil},
		{"prog tenants list --limit 5 --v", []string{"--verbose"}},
		{"prog -v tenants list --he", []string{"--help"}},
		{"prog completion ", []string{"bash", "zsh", "fish"}},
		{"prog completion bash ", nil},
		{"prog tenants get ", nil},
		{"prog sec", nil},
		{"prog 'tenants' li", []string{"list"}},
	} {
		t.Run(tc.line, func(t *testing.T) {
			w := Split(tc.line)
			if got := words(Candidates(k.Model.Node, w[1:])); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	if got := Candidates(k.Model.Node, []string{"-"}); got[0] != (Candidate{Word: "--help", Help: "Show context-sensitive help"}) || got[1].Help != "Say more" {
		t.Errorf("help texts: %q", got)
	}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"", []string{""}},
		{"prog", []string{"prog"}},
		{"prog ", []string{"prog", ""}},
		{"prog  tenants\tli", []string{"prog", "tenants", "li"}},
		{`prog 'a b' "c d" e\ f`, []string{"prog", "a b", "c d", "e f"}},
		{`prog "a\"b" 'it'\''s'`, []string{"prog", `a"b`, "it's"}},
		{`prog ''`, []string{"prog", ""}},
		{`prog "unclosed`, []string{"prog", "unclosed"}},
	} {
		if got := Split(tc.line); !slices.Equal(got, tc.want) {
			t.Errorf("Split(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

func TestScript(t *testing.T) {
	for _, sh := range Shells {
		s, err := Script(sh, "prog", "/opt/my tools/prog")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(s, `'/opt/my tools/prog' __complete`) {
			t.Errorf("%s script does not run the binary by its quoted path:\n%s", sh, s)
		}
	}
	if _, err := Script("tcsh", "prog", "prog"); err == nil {
		t.Error("a tcsh script")
	}
}
