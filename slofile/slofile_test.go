package slofile_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/slofile"
)

func TestParse(t *testing.T) {
	src := `# the SLOs of the tests
workflows:
  "*":
    backing-off: 10m
    run: 2h
  tenant-provisioning:
    running: 30m
    backing-off: 0   # none: overrides the default
  billing: &billing
    waiting: 24h
  ledger: *billing
`
	s, err := slofile.Parse("slo.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		wt   string
		slo  substate.SLO
		want time.Duration
	}{
		{"tenant-provisioning", substate.SLORunning, 30 * time.Minute},
		{"tenant-provisioning", substate.SLOBackingOff, 0},
		{"tenant-provisioning", substate.SLORun, 2 * time.Hour},
		{"billing", substate.SLOWaiting, 24 * time.Hour},
		{"billing", substate.SLOBackingOff, 10 * time.Minute},
		{"ledger", substate.SLOWaiting, 24 * time.Hour},
		{"unknown-type", substate.SLOBackingOff, 10 * time.Minute},
		{"unknown-type", substate.SLORunning, 0},
	}
	for _, c := range cases {
		if got := s.Limit(c.wt, c.slo); got != c.want {
			t.Errorf("%s %s = %s, want %s", c.wt, c.slo, got, c.want)
		}
	}
	if n, def := s.Types(); n != 3 || !def {
		t.Errorf("Types = %d, %t; want 3 and a default", n, def)
	}
	t.Run("NoDefault", func(t *testing.T) {
		s, err := slofile.Parse("slo.yaml", []byte("workflows:\n  billing:\n    error: 5m\n"))
		if err != nil {
			t.Fatal(err)
		}
		if at, _ := s.Deadline("ledger", substate.StateError, time.Now(), time.Now()); !at.IsZero() {
			t.Errorf("a type without an entry and no default has deadline %s", at)
		}
	})
}

// Every hostile file is refused with its place and what is wrong.
func TestParseRefuses(t *testing.T) {
	many := func(n int) string {
		var b strings.Builder
		b.WriteString("workflows:\n")
		for i := range n {
			fmt.Fprintf(&b, "  w%d: {run: 1h}\n", i)
		}
		return b.String()
	}
	cases := []struct {
		name, src, want string
	}{
		{"Empty", "  \n", "slo.yaml:1:1: the file is empty"},
		{"NotYAML", "workflows: [\n", "slo.yaml:2:1: "},
		{"UnquotedStar", "workflows:\n  *:\n    run: 1h\n", `write the default entry's key quoted, as "*"`},
		{"UnknownTopKey", "workflow:\n  \"*\": {run: 1h}\n", `slo.yaml:1:1: unknown key "workflow": an SLO file has one key, workflows`},
		{"NoWorkflows", "workflows:\n", "slo.yaml:1:11: workflows must be a mapping, not nothing"},
		{"UnknownSubState", "workflows:\n  \"*\":\n    stuck: 1h\n", `slo.yaml:3:5: workflow "*": unknown key "stuck": want running, waiting, backing-off, error or run`},
		{"TerminalSubState", "workflows:\n  billing:\n    succeeded: 1h\n", "slo.yaml:3:5: workflow \"billing\": unknown key \"succeeded\""},
		{"Negative", "workflows:\n  billing:\n    error: -5m\n", `slo.yaml:3:12: workflow "billing": error: -5m0s is negative`},
		{"Absurd", "workflows:\n  billing:\n    run: 87600h\n", `slo.yaml:3:10: workflow "billing": run: 87600h0m0s is longer than 8784h0m0s (366 days)`},
		{"Overflow", "workflows:\n  billing:\n    run: 99999999999999h\n", `slo.yaml:3:10: workflow "billing": run: "99999999999999h" is not a duration`},
		{"TooFine", "workflows:\n  billing:\n    run: 10ms\n", "is shorter than 1s"},
		{"Days", "workflows:\n  billing:\n    waiting: 2d\n", "(days are written in hours: 24h)"},
		{"NoUnit", "workflows:\n  billing:\n    waiting: 30\n", `waiting: "30" is not a duration`},
		{"NotAScalar", "workflows:\n  billing:\n    waiting: [1h]\n", "waiting must be a duration such as 10m or 2h, not a list"},
		{"NoSLO", "workflows:\n  billing:\n", `slo.yaml:2:11: workflow "billing" has no SLO`},
		{"Twice", "workflows:\n  billing: {run: 1h}\n  billing: {run: 2h}\n", `slo.yaml:3:3: "billing" is given twice in workflows`},
		{"LongType", "workflows:\n  " + strings.Repeat("x", 300) + ": {run: 1h}\n", "is longer than 256 bytes"},
		{"TooManyTypes", many(slofile.MaxWorkflows + 1), fmt.Sprintf("slo.yaml:%d:3: more than 10000 workflow types", slofile.MaxWorkflows+2)},
		{"MillionEntries", many(1_000_000), "slo.yaml:1:1: the file is larger than 1048576 bytes"},
		{"AliasBomb", aliasBomb(), "the file expands to more than 200000 YAML nodes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := slofile.Parse("slo.yaml", []byte(c.src))
			if err == nil {
				t.Fatalf("accepted, SLOs %v", s)
			}
			if msg := err.Error(); !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q, want one line containing %q", msg, c.want)
			}
			if substate.ErrorCode(err) != substate.EINVALID {
				t.Fatalf("error code %q, want %q", substate.ErrorCode(err), substate.EINVALID)
			}
			var pe *slofile.Error
			if !errors.As(err, &pe) || pe.Line < 1 || pe.Col < 1 {
				t.Fatalf("no position in %v", err)
			}
		})
	}
}

// aliasBomb is a small file whose aliases make the parser read a mapping
// of a thousand keys a thousand times.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("workflows:\n  w0: &m {")
	for i := range 1000 {
		fmt.Fprintf(&b, "k%d: 1h, ", i)
	}
	b.WriteString("run: 1h}\n")
	for i := 1; i < 1000; i++ {
		fmt.Fprintf(&b, "  w%d: *m\n", i)
	}
	return b.String()
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	t.Run("OK", func(t *testing.T) {
		path := filepath.Join(dir, "slo.yaml")
		if err := os.WriteFile(path, []byte("workflows:\n  \"*\": {error: 5m}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := slofile.Load(path)
		if err != nil || s.Limit("x", substate.SLOError) != 5*time.Minute {
			t.Fatalf("Load = %v, %v", s, err)
		}
	})
	for name, path := range map[string]string{"Missing": filepath.Join(dir, "none.yaml"), "Directory": dir} {
		t.Run(name, func(t *testing.T) {
			_, err := slofile.Load(path)
			if err == nil || !strings.Contains(err.Error(), path) || substate.ErrorCode(err) != substate.EINVALID {
				t.Fatalf("Load(%s) = %v, want an error naming the file", path, err)
			}
		})
	}
}

// The example shipped in deploy/ parses.
func TestExample(t *testing.T) {
	s, err := slofile.Load(filepath.Join("..", "deploy", "slo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if n, def := s.Types(); n == 0 || !def {
		t.Fatalf("the example has %d workflow types and default %t", n, def)
	}
}

// FuzzParse feeds arbitrary text to the parser: it must never panic, and
// every refusal is one line with a position.
func FuzzParse(f *testing.F) {
	f.Add([]byte("workflows:\n  \"*\":\n    backing-off: 10m\n    run: 2h\n"))
	f.Add([]byte("workflows:\n  *:\n"))
	f.Add([]byte(aliasBomb()))
	f.Add([]byte("workflows: {a: {run: -1s}, b: {error: 1d}}"))
	f.Fuzz(func(t *testing.T, src []byte) {
		_, err := slofile.Parse("f.yaml", src)
		if err == nil {
			return
		}
		var pe *slofile.Error
		if strings.Contains(err.Error(), "\n") && !errors.As(err, &pe) {
			t.Fatalf("error on several lines without a position: %q", err)
		}
		if !errors.As(err, &pe) && !strings.HasPrefix(err.Error(), "SLO file") {
			t.Fatalf("error without a position: %v", err)
		}
	})
}
