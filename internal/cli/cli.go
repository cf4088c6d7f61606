// Package cli is the kprod command: "kprod perf" (a producer benchmark
// with the output of Kafka's kafka-producer-perf-test.sh) and "kprod
// produce" (a console producer reading records from stdin). It lives
// apart from package main so that tests can run it in-process through Run.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/kprod/kprod"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFail        = 1   // records failed, the cluster was unreachable, ...
	exitUsage       = 2   // bad flags or producer settings
	exitInterrupted = 130 // stopped by SIGINT/SIGTERM before the end (128+SIGINT, as shells report it)
)

// Version is the kprod version; release builds set it with
// -ldflags "-X github.com/kprod/kprod/internal/cli.Version=v1.2.3".
// Otherwise it comes from the module's build info.
var Version = ""

// interruptGrace bounds the whole shutdown after SIGINT/SIGTERM: sending
// what was already read, then Flush and Close. The user asked to stop.
var interruptGrace = 10 * time.Second

// Run runs the kprod command line args (without the program name) and
// returns the exit status: 0 success, 1 failure (records failed, cluster
// unreachable), 2 bad usage or configuration, 130 interrupted.
//
// ctx ending (main cancels it on SIGINT/SIGTERM) stops reading and
// sending; what was already read is delivered within interruptGrace of
// that, the producer's close included.
//
// produce reads stdin in a goroutine. If ctx ends while that goroutine is
// blocked in a Read, Run closes stdin when it is an io.Closer and waits
// for the Read to return, except when stdin is an *os.File: a blocked
// read of a terminal or pipe cannot be interrupted, and the process is
// about to exit anyway.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "perf":
		return newPerfCmd().run(ctx, rest, stdout, stderr)
	case "produce":
		return newProduceCmd().run(ctx, rest, stdin, stdout, stderr)
	case "version", "--version":
		fmt.Fprintf(stdout, "kprod %s (%s %s/%s)\n", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return exitOK
	case "help", "-h", "--help", "-help":
		if len(rest) == 0 {
			usage(stdout)
			return exitOK
		}
		switch rest[0] {
		case "perf":
			newPerfCmd().usage(stdout)
		case "produce":
			newProduceCmd().usage(stdout)
		case "version":
			fmt.Fprintln(stdout, "kprod version: prints kprod's version, the Go version it was built with, and the platform")
		case "help":
			usage(stdout)
		default:
			fmt.Fprintf(stderr, "kprod help: unknown command %q; the commands are perf, produce, version\n", rest[0])
			return exitUsage
		}
		return exitOK
	default:
		fmt.Fprintf(stderr, "kprod: unknown command %q\n\n", cmd)
		usage(stderr)
		return exitUsage
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: kprod COMMAND [options]

kprod is a Kafka producer for Go that mirrors the Java KafkaProducer; this
command exercises it from the shell. Producer settings take the Java property
names (-X linger.ms=10, --producer.config producer.properties).

commands:
  perf       measure producer throughput and latency, like kafka-producer-perf-test.sh;
             without --bootstrap-server it runs against an embedded in-process cluster
  produce    send the lines of stdin as records, like kafka-console-producer.sh
  version    print the version
  help CMD   describe a command and its flags

examples:
  kprod perf --num-records 200000
  kprod perf --bootstrap-server localhost:9092 --topic t --record-size 1024 --json
  printf 'k1:v1\nk2:v2\n' | kprod produce --brokers localhost:9092 --topic t --key-delimiter :

Run "kprod help perf" or "kprod produce --help" for a command's flags.
`)
}

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// usageFail reports a usage or configuration error: the message and a
// pointer to the help, exit status 2. Other errors are reported as is
// with status 1.
func usageFail(stderr io.Writer, cmd string, err error) int {
	var ue *usageError
	var ce *configError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "kprod %s: %v\nRun \"kprod %s --help\" for usage.\n", cmd, err, cmd)
		return exitUsage
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "kprod %s: %v\n", cmd, err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "kprod %s: %v\n", cmd, err)
	return exitFail
}

// closeProducer delivers what is buffered and closes p. It waits up to
// delivery.timeout.ms (by then every record has its outcome), but no
// longer than gctx: the run's withGrace(ctx, interruptGrace), made when
// the run starts, so that after SIGINT the sends of what was read and
// this close share one grace period instead of getting one each. Then
// what is left fails with ErrAborted.
//
// It flushes before it closes, and after a complete flush gives Close
// only a moment: every callback has run by then. The error, if records
// were aborted, wraps ErrAborted and speaks to the command's user (the
// library's advice is about Close's ctx, which the user does not set).
func closeProducer(gctx context.Context, p *kprod.Producer, deliveryTimeout time.Duration) error {
	cctx, cancel := context.WithTimeout(gctx, deliveryTimeout+5*time.Second)
	defer cancel()
	if err := p.Flush(cctx); err != nil {
		// The deadline has passed: Close aborts what is left.
		if err := p.Close(cctx); errors.Is(err, kprod.ErrAborted) {
			return fmt.Errorf("%w: the records not delivered when the wait for them ended (delivery.timeout.ms + 5 s after the last record, or %v after an interrupt) were aborted; check that the brokers are reachable, or raise delivery.timeout.ms", kprod.ErrAborted, interruptGrace)
		} else if err != nil {
			return err
		}
		return nil
	}
	short, cancelShort := context.WithTimeout(cctx, closeAfterFlush)
	defer cancelShort()
	_ = p.Close(short) // nothing is left to abort: an error here says nothing about the records
	return nil
}

// withGrace returns a context that ends grace after parent does: work
// that must finish after an interrupt (delivering what was read) gets a
// bounded time, not none.
func withGrace(parent context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var timer *time.Timer
	released := false
	stop := context.AfterFunc(parent, func() {
		mu.Lock()
		defer mu.Unlock()
		if !released {
			timer = time.AfterFunc(grace, cancel)
		}
	})
	return ctx, func() {
		stop()
		mu.Lock()
		released = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// closeAfterFlush bounds Close once Flush has seen every record's outcome.
var closeAfterFlush = 2 * time.Second

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
