package timex_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/substatehq/substate/internal/timex"
)

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if err := timex.Sleep(ctx, time.Millisecond); err != nil {
		t.Fatalf("sleep: %v", err)
	}
	cancel()
	if err := timex.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep on a cancelled context: %v, want context.Canceled", err)
	}
	if err := timex.Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("zero sleep on a cancelled context: %v, want context.Canceled", err)
	}
}

func TestBackoff(t *testing.T) {
	for _, tt := range []struct {
		name     string
		n        int
		j        float64
		want     time.Duration
		lo, hi   time.Duration
		withRand bool
	}{
		{name: "FirstLowest", n: 1, j: 0, want: 500 * time.Millisecond},
		{name: "FirstHighest", n: 1, j: 0.999, lo: 999 * time.Millisecond, hi: time.Second},
		{name: "Doubles", n: 3, j: 0.5, want: 3 * time.Second},
		{name: "Capped", n: 40, j: 0, want: 30 * time.Second},
		{name: "NonPositiveIsFirst", n: 0, j: 0, want: 500 * time.Millisecond},
		{name: "DefaultRandInRange", n: 2, withRand: true, lo: time.Second, hi: 2 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := timex.Backoff{Base: time.Second, Max: time.Minute}
			if !tt.withRand {
				b.Rand = func() float64 { return tt.j }
			}
			got := b.Delay(tt.n)
			switch {
			case tt.want != 0 && got != tt.want:
				t.Fatalf("Delay(%d) = %v, want %v", tt.n, got, tt.want)
			case tt.want == 0 && (got < tt.lo || got >= tt.hi):
				t.Fatalf("Delay(%d) = %v, want in [%v, %v)", tt.n, got, tt.lo, tt.hi)
			}
		})
	}
}
