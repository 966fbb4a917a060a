package worker

import (
	"context"
	"errors"
	"testing"
)

func TestRunGroup(t *testing.T) {
	boom := errors.New("boom")
	block := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	t.Run("FirstError", func(t *testing.T) {
		err := RunGroup(context.Background(), block, func(context.Context) error { return boom })
		if !errors.Is(err, boom) || errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want only boom", err)
		}
	})
	t.Run("StoppedOnItsOwn", func(t *testing.T) {
		err := RunGroup(context.Background(), block, func(context.Context) error { return nil })
		if !errors.Is(err, ErrStopped) {
			t.Fatalf("got %v, want ErrStopped", err)
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := RunGroup(ctx, block, func(ctx context.Context) error { <-ctx.Done(); return nil }); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want nil or cancelled", err)
		}
	})
}
