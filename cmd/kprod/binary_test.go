package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/testcluster"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The real binary, with real signals: main must turn SIGINT/SIGTERM into
// "stop reading, deliver what was read, exit" while stdin stays open.
func TestBinaryProduceSignal(t *testing.T) {
	bin := buildBinary(t)
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			c := newCluster(t, 1, "t")
			// linger.ms=60000 holds the last, partial batch until the
			// producer closes: only the shutdown path can deliver it.
			// batch.size=300 sends the full batches at once, which shows
			// the test when the lines have been read.
			cmd, stdin, stderr, done := startBinary(t, bin, "produce", "-b", strings.Join(c.ListenAddrs(), ","), "-t", "t",
				"-X", "linger.ms=60000", "-X", "batch.size=300")
			exited := false
			defer func() {
				if !exited {
					cmd.Process.Kill()
					<-done
				}
			}()

			const n = 100
			var in strings.Builder
			for i := range n {
				fmt.Fprintf(&in, "line-%03d\n", i)
			}
			// One write under PIPE_BUF arrives whole: the binary reads all
			// lines in one read, so once the first batch is visible, every
			// line has been read.
			if _, err := stdin.Write([]byte(in.String())); err != nil {
				t.Fatal(err)
			}
			waitForRecords(t, c.ListenAddrs(), "t", 1)

			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				exited = true
				var ee *exec.ExitError
				if err != nil && !errors.As(err, &ee) {
					t.Fatal(err)
				}
				if code := cmd.ProcessState.ExitCode(); code != 130 {
					t.Errorf("exit %d, want 130 (interrupted)\nstderr: %s", code, stderr.String())
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("kprod produce did not exit within 20s of %v\nstderr: %s", sig, stderr.String())
			}
			if want := fmt.Sprintf("%d records sent, 0 failed (interrupted", n); !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
			}
			recs := consume(t, c.ListenAddrs(), "t", n)
			for i, r := range recs {
				if want := fmt.Sprintf("line-%03d", i); string(r.Value) != want {
					t.Fatalf("record %d is %q, want %q", i, r.Value, want)
				}
			}
		})
	}
}

// startBinary starts bin with args, its stdin a pipe (closed when the
// test ends) and its stderr collected; done receives cmd.Wait's result.
func startBinary(t *testing.T, bin string, args ...string) (cmd *exec.Cmd, stdin io.WriteCloser, stderr *bytes.Buffer, done chan error) {
	t.Helper()
	cmd = exec.Command(bin, args...)
	stderr = new(bytes.Buffer)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close() })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done = make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, stdin, stderr, done
}

// buildBinary builds the kprod command into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	testcluster.SkipIfShort(t, "builds the binary")
	bin := filepath.Join(t.TempDir(), "kprod")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// A second SIGINT ends the process at once, while the first one's bounded
// shutdown still waits (here for a broker that does not exist).
func TestBinarySecondSignal(t *testing.T) {
	bin := buildBinary(t)
	// A "broker" that accepts and never answers: its accept shows that the
	// process is up, with its signal handler (set first thing in main),
	// and has made its producer, which then reads the line and waits for
	// metadata.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			accepted <- c
		}
	}()
	cmd, stdin, stderr, done := startBinary(t, bin, "produce", "-b", l.Addr().String(), "-t", "t", "-X", "max.block.ms=60000")
	if _, err := stdin.Write([]byte("a\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-accepted:
		t.Cleanup(func() { c.Close() })
	case err := <-done:
		t.Fatalf("exited before connecting (%v):\n%s", err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("no connection from the process in 30s:\n%s", stderr.String())
	}
	time.Sleep(100 * time.Millisecond) // the line, already written, is read
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("exited on the first signal (%v), before its 10s grace:\n%s", err, stderr.String())
	case <-time.After(500 * time.Millisecond):
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Errorf("process state %v, want killed by SIGINT", cmd.ProcessState)
		}
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running 5s after the second SIGINT\nstderr: %s", stderr.String())
	}
}

// waitForRecords waits until topic holds at least n records.
func waitForRecords(t *testing.T, brokers []string, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("only %d records in %s after 15s, want %d", got, topic, n)
		}
		got += len(fs.Records())
	}
}
