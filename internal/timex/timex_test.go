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
