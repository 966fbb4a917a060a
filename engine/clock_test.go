package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSystemClock(t *testing.T) {
	var c SystemClock
	ctx := context.Background()
	if err := c.SleepUntil(ctx, c.Now().Add(-time.Hour)); err != nil {
		t.Errorf("past deadline: %v", err)
	}
	if err := c.SleepUntil(ctx, c.Now().Add(time.Millisecond)); err != nil {
		t.Errorf("short sleep: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.SleepUntil(cancelled, c.Now().Add(time.Hour)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled sleep: %v", err)
	}
}

func TestManualClock(t *testing.T) {
	c := NewManualClock(epoch)
	woke := make(chan error, 1)
	go func() { woke <- c.SleepUntil(context.Background(), epoch.Add(time.Minute)) }()
	for c.Sleepers() != 1 {
		time.Sleep(time.Millisecond)
	}
	c.Advance(59 * time.Second)
	select {
	case <-woke:
		t.Fatal("woke before the deadline")
	case <-time.After(10 * time.Millisecond):
	}
	c.Advance(time.Second)
	if err := <-woke; err != nil || c.Sleepers() != 0 {
		t.Fatalf("err %v, sleepers %d", err, c.Sleepers())
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { woke <- c.SleepUntil(ctx, epoch.Add(time.Hour)) }()
	for c.Sleepers() != 1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-woke; !errors.Is(err, context.Canceled) || c.Sleepers() != 0 {
		t.Fatalf("err %v, sleepers %d", err, c.Sleepers())
	}
}
