package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
)

// SUBSTATE_UNRESOLVED never remembers an execution longer than
// SUBSTATE_RAW keeps the later events its memory spares a dead letter:
// those events are nowhere else.
func TestUnresolvedStreamKeepsNoLongerThanRaw(t *testing.T) {
	const day = 24 * time.Hour
	tests := []struct {
		name string
		raw  time.Duration
		want time.Duration
	}{
		{"Default", 30 * day, bus.UnresolvedTTL},
		{"RawUnlimited", 0, bus.UnresolvedTTL},
		{"RawShorter", day, day},
	}
	b, err := bus.Open(bus.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo := bus.DefaultTopology()
			topo.Raw.MaxAge = tt.raw
			if err := topo.EnsureUnresolvedStream(context.Background(), b.JetStream); err != nil {
				t.Fatal(err)
			}
			s, err := b.JetStream.Stream(context.Background(), substate.StreamUnresolved)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := s.CachedInfo().Config.MaxAge, tt.want; got != want {
				t.Errorf("%s keeps %v with SUBSTATE_RAW kept %v, want %v", substate.StreamUnresolved, got, tt.raw, want)
			}
		})
	}
}
