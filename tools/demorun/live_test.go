package demorun

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate"
)

// TestDemoLive checks the status line on a terminal: redrawn under each
// change line with the tenants counted by their current sub-state, and
// erased before the summary. Without a terminal there is none.
func TestDemoLive(t *testing.T) {
	change := func(tenant string, old, new substate.SubState) *nats.Msg {
		data, _ := substate.MarshalChangeEvent(substate.Change{TenantID: tenant,
			Old: substate.TenantView{WorkflowSubState: old}, New: substate.TenantView{WorkflowSubState: new}}, "")
		return &nats.Msg{Data: data}
	}
	t.Run("Terminal", func(t *testing.T) {
		out := &ttyBuffer{}
		d := &demoRun{out: out, expect: map[string]string{}, current: map[string]substate.SubState{}, start: time.Now()}
		d.showLive(context.Background())
		d.printChange(change("acme", "", substate.StateRunning))
		d.printChange(change("globex", "", substate.StateRunning))
		d.printChange(change("acme", substate.StateRunning, substate.StateWaiting))
		d.stopLive()
		d.printf("summary\n")

		got := out.String()
		lines := strings.Split(got, "\r\x1b[K")
		last := lines[len(lines)-2] // before the final erase
		if !strings.Contains(last, "acme") || !strings.Contains(last, "waiting") ||
			!strings.Contains(last, "now: running 1, waiting 1") {
			t.Errorf("last change and status line %q", last)
		}
		if !strings.HasSuffix(got, "\r\x1b[Ksummary\n") {
			t.Errorf("status line not erased before the summary: %q", got[max(0, len(got)-120):])
		}
	})
	t.Run("Width", func(t *testing.T) {
		d := &demoRun{current: map[string]substate.SubState{}, start: time.Now()}
		for i := range 600 {
			d.current[fmt.Sprint("tenant-", i)] = substate.SubStates[i%len(substate.SubStates)]
		}
		if line := d.statusLine(); utf8.RuneCountInString(line) > statusWidth {
			t.Errorf("status line of %d columns would wrap: %q", utf8.RuneCountInString(line), line)
		}
	})
	t.Run("NotTerminal", func(t *testing.T) {
		out := &bytes.Buffer{}
		d := &demoRun{out: out, expect: map[string]string{}, current: map[string]substate.SubState{}, start: time.Now()}
		d.showLive(context.Background())
		d.printChange(change("acme", "", substate.StateRunning))
		d.stopLive()
		if got := out.String(); strings.Contains(got, "\x1b") || strings.Contains(got, "now:") {
			t.Errorf("output %q has a status line", got)
		}
	})
}

// ttyBuffer is an output that says it is a terminal.
type ttyBuffer struct{ bytes.Buffer }

func (*ttyBuffer) Terminal() bool { return true }
