package state

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/substatehq/substate"
)

// The outbox value written with the change's data encoded first is the
// JSON of its outboxEntry, byte for byte, so files written before and
// after read the same; and the change keeps that data.
func TestEncodeOutboxIsTheEntry(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	base := substate.Change{Seq: 9, TenantID: "acme <&> ü",
		Old: substate.TenantView{TenantID: "acme <&> ü", WorkflowSubState: substate.StateRunning},
		New: substate.TenantView{TenantID: "acme <&> ü", WorkflowSubState: substate.StateFailed, WorkflowErrorMessage: "boom\n\"x\"", UpdatedAt: at}}
	for _, tt := range []struct {
		name string
		edit func(c *substate.Change)
	}{
		{"Bare", func(*substate.Change) {}},
		{"TraceParent", func(c *substate.Change) { c.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" }},
		{"Hop", func(c *substate.Change) { c.Hop = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01" }},
		{"Unstuck", func(c *substate.Change) { c.Kind = substate.ChangeUnstuck }},
		{"All", func(c *substate.Change) {
			c.TraceParent, c.Hop, c.Kind = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "h", substate.ChangeStuck
		}},
		{"Longer than the data", func(c *substate.Change) { c.Hop = strings.Repeat("h", 8192) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.edit(&c)
			want, err := json.Marshal(&outboxEntry{Change: c, TraceParent: c.TraceParent, Hop: c.Hop, Kind: c.Kind})
			if err != nil {
				t.Fatal(err)
			}
			got, err := encodeOutbox(&c)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("stored\n%s\nwant\n%s", got, want)
			}
			data, _ := json.Marshal(&c)
			if !bytes.Equal(c.Encoded, data) {
				t.Fatalf("the change kept\n%s\nwant its data\n%s", c.Encoded, data)
			}
			_ = append(c.Encoded, "overwritten"...) // what the change keeps is not the entry's to write
			if !bytes.Equal(got, want) {
				t.Fatalf("after an append to the change's data, stored\n%s\nwant\n%s", got, want)
			}
			again, err := encodeOutbox(&c) // the unstuck message of the same change
			if err != nil || !bytes.Equal(again, want) {
				t.Fatalf("with its data encoded already, stored\n%s (%v)\nwant\n%s", again, err, want)
			}
		})
	}
}
