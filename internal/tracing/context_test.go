package tracing_test

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/substatehq/substate/internal/tracing"
)

func TestParseFormat(t *testing.T) {
	for _, tp := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
	} {
		t.Run(tp, func(t *testing.T) {
			sc := tracing.Parse(tp)
			if !sc.IsValid() || !sc.IsRemote() {
				t.Fatalf("Parse(%q) = %v, want a valid remote context", tp, sc)
			}
			if got := tracing.Format(sc); got != tp {
				t.Errorf("Format(Parse(%q)) = %q", tp, got)
			}
		})
	}
	t.Run("LaterVersion", func(t *testing.T) {
		sc := tracing.Parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-extra")
		if got, want := tracing.Format(sc), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	for _, bad := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "00-XYZ", strings.Repeat("0", 55)} {
		t.Run("Invalid", func(t *testing.T) {
			if sc := tracing.Parse(bad); sc.IsValid() {
				t.Errorf("Parse(%q) = %v, want invalid", bad, sc)
			}
		})
	}
	if got := tracing.Format(trace.SpanContext{}); got != "" {
		t.Errorf("Format(invalid) = %q, want empty", got)
	}
}

func TestXRay(t *testing.T) {
	for _, tt := range []struct {
		name, header   string
		trace, span    string // "" when the header names no context
		sampled, valid bool
	}{
		{"OK", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
			"5759e988bd862e3fe1be46a994272793", "53995c3f42cd8ad8", true, true},
		{"Spaces and order", "Sampled=0; Parent=53995C3F42CD8AD8; Root=1-5759E988-BD862E3FE1BE46A994272793",
			"5759e988bd862e3fe1be46a994272793", "53995c3f42cd8ad8", false, true},
		{"Lineage ignored", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a87bd80c:1|68fd508a:5",
			"5759e988bd862e3fe1be46a994272793", "53995c3f42cd8ad8", true, true},
		{"No parent", "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1", "", "", false, false},
		{"Bad root", "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", "", "", false, false},
		{"Short root", "Root=1-5759e988-bd86;Parent=53995c3f42cd8ad8", "", "", false, false},
		{"Not hex", "Root=1-5759e988-bd862e3fe1be46a99427279z;Parent=53995c3f42cd8ad8", "", "", false, false},
		{"Too long", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;" + strings.Repeat("x", 300), "", "", false, false},
		{"Empty", "", "", "", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sc := tracing.XRay(tt.header)
			if got, want := sc.IsValid(), tt.valid; got != want {
				t.Fatalf("valid = %v, want %v (%v)", got, want, sc)
			}
			if !tt.valid {
				return
			}
			if got, want := sc.TraceID().String(), tt.trace; got != want {
				t.Errorf("trace id = %s, want %s", got, want)
			}
			if got, want := sc.SpanID().String(), tt.span; got != want {
				t.Errorf("span id = %s, want %s", got, want)
			}
			if got, want := sc.IsSampled(), tt.sampled; got != want {
				t.Errorf("sampled = %v, want %v", got, want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	f.Fuzz(func(t *testing.T, s string) {
		if sc := tracing.Parse(s); sc.IsValid() {
			if back := tracing.Parse(tracing.Format(sc)); !back.Equal(sc) {
				t.Errorf("Parse(Format(Parse(%q))) = %v, want %v", s, back, sc)
			}
		}
		if sc := tracing.XRay(s); sc.IsValid() && len(s) > tracing.MaxXRayHeader {
			t.Errorf("XRay read a header of %d bytes", len(s))
		}
	})
}
