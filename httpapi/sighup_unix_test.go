//go:build unix

package httpapi_test

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

func TestKeysReloadOnSIGHUP(t *testing.T) {
	keys := keyFile(t, keyLine("old", "read", "*", "key-old"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// caught keeps SIGHUP caught for the rest of the test binary: a signal
	// sent in the last round may arrive after Watch stopped listening, and
	// uncaught it would end the process. Notify drops what it cannot buffer.
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, syscall.SIGHUP)
	done := make(chan error, 1)
	go func() { done <- keys.Watch(ctx, time.Hour, nil) }() // the file is not polled within the test
	defer func() { cancel(); <-done }()
	if err := os.WriteFile(keys.File, []byte(keyLine("new", "read", "*", "key-new")), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Skip("no SIGHUP here:", err)
		}
		if _, ok := keys.Set().Lookup("key-new"); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("SIGHUP did not reload the keys")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
