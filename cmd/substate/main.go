// Command substate is the substate worker and its tools: it receives
// workflow status changes, normalizes them into canonical sub-state events
// on NATS JetStream and keeps a per-tenant view. Run "substate --help".
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal now kills the process at once
	}()
	m := NewMain()
	os.Exit(m.Run(ctx, os.Args[1:]))
}
