package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

type forceKey struct{}

// forceContext returns the context that a second interrupt ends, or one that never
// ends.
func forceContext(ctx context.Context) context.Context {
	if f, ok := ctx.Value(forceKey{}).(context.Context); ok {
		return f
	}
	return context.Background()
}

// interrupts returns a context that the first SIGINT or SIGTERM ends, carrying
// (for forceContext) one that the second ends: a run stops at the first, and stops
// cleaning up at the second.
func interrupts() (context.Context, func()) {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	force, forceCancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			cancel()
			select {
			case <-sig:
				fmt.Fprintf(os.Stderr, "\n%s again: not waiting any longer\n", s)
				forceCancel()
			case <-done:
			}
		case <-done:
		}
	}()
	return context.WithValue(ctx, forceKey{}, force), func() {
		signal.Stop(sig)
		close(done)
		cancel()
		forceCancel()
	}
}
