package cli

import (
	"context"
	"fmt"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/internal/credential"
	"github.com/manifoldflow/manifold/runtimes/tracing"
)

// traceFlush bounds how long a run's end waits to send its trace.
const traceFlush = 5 * time.Second

// startTracing returns the tracer the OTEL_* environment configures (nil when it
// configures none), and what ends it: that sends the spans not sent yet, for
// at most traceFlush, and says so when it cannot.
func startTracing(c *ucli.Context) (*tracing.Tracer, func(), error) {
	tr, err := tracing.FromEnv(c.Context)
	if err != nil {
		return nil, nil, usageErr("%v", err)
	}
	return tr, func() {
		if tr == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Context), traceFlush)
		defer cancel()
		if err := tr.Shutdown(ctx); err != nil {
			fmt.Fprintf(c.App.ErrWriter, "sending the run's trace: %v\n", credential.RedactError(err))
		}
	}, nil
}
