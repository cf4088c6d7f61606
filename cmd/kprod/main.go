// Command kprod runs the kprod producer from the shell: "kprod perf" is a
// producer benchmark with the output of Kafka's kafka-producer-perf-test.sh,
// "kprod produce" a console producer. Run "kprod help" for the commands and
// "kprod help perf" for a command's flags. The code is in internal/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kprod/kprod/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts the bounded shutdown; then the default
	// handling is back, so a second one ends the process at once.
	context.AfterFunc(ctx, stop)
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
