package cli

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kprod/kprod"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var summaryRE = regexp.MustCompile(`(\d+) records sent, (\d+) failed(?:, (\d+) not sent)?`)

// TestProduceCountsLinesReadAfterStop: after a run-stopping error (unknown
// topic), the lines already read (channel + reader buffer) were dropped
// uncounted: "0 records sent, 1 failed" for 5 lines.
func TestProduceCountsLinesReadAfterStop(t *testing.T) {
	c := newTestCluster(t, 1, "exists")
	const n = 5
	code, _, stderr := runCLI(context.Background(), strings.NewReader(strings.Repeat("line\n", n)), "produce",
		"-b", c.ListenAddrs()[0], "-t", "does-not-exist", "-X", "max.block.ms=300")
	if code != exitFail {
		t.Errorf("exit %d, want %d\nstderr: %s", code, exitFail, stderr)
	}
	m := summaryRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no summary line:\n%s", stderr)
	}
	sum := 0
	for _, s := range m[1:] {
		k, _ := strconv.Atoi(s) // "" for an absent count: 0
		sum += k
	}
	if sum != n || m[3] == "" {
		t.Errorf("summary %q adds up to %d, want the %d lines read, some not sent\n%s", m[0], sum, n, stderr)
	}
	if want := m[3] + " records already read were not sent"; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
}

// TestProduceShutdownWithinGrace: after SIGINT, sends blocked on a full
// buffer got interruptGrace, then closeProducer started a grace of its
// own: twice the documented bound (about 22 s for 10 s).
func TestProduceShutdownWithinGrace(t *testing.T) {
	const grace = 1500 * time.Millisecond
	withTestGrace(t, grace)
	c := newTestCluster(t, 1, "t")
	// The broker takes produce requests and never answers them: the
	// records stay buffered, and the buffer fills.
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, true
	})
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan string, 1)
	go func() {
		_, _, stderr := runCLI(ctx, pr, "produce", "-b", c.ListenAddrs()[0], "-t", "t",
			"-X", "buffer.memory=65536", "-X", "batch.size=16384", "-X", "max.block.ms=60000")
		done <- stderr
	}()
	line := strings.Repeat("x", 1000) + "\n"
	blocked := make(chan struct{})
	go func() {
		// Write until produce stops taking lines: its Send waits for
		// buffer memory.
		for {
			w := make(chan error, 1)
			go func() { _, err := io.WriteString(pw, line); w <- err }()
			select {
			case err := <-w:
				if err != nil {
					return
				}
			case <-time.After(500 * time.Millisecond):
				close(blocked)
				<-w
				return
			}
		}
	}()
	select {
	case <-blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("produce never blocked on the full buffer")
	}
	start := time.Now()
	cancel()
	var stderr string
	select {
	case stderr = <-done:
	case <-time.After(4 * grace):
		t.Fatalf("Run did not return within %v of the interrupt", 4*grace)
	}
	// The records left were aborted, said in the command's terms (the
	// library's advice about Close's ctx is not the user's to follow).
	if !strings.Contains(stderr, "were aborted") || strings.Contains(stderr, "longer ctx") {
		t.Errorf("stderr does not say, in the command's terms, that the records left were aborted:\n%s", stderr)
	}
	// The grace, plus a moment to abort and close.
	el := time.Since(start)
	t.Logf("shutdown took %v", el)
	if el > grace*19/10 { // a grace per step would be 2 graces at least
		t.Errorf("the shutdown took %v after the interrupt, want at most the grace, %v (and a moment)", el, grace)
	}
}

// TestProduceReaderPropertyHint: kafka-console-producer's way to read
// keys (--property parse.key=true, or as a producer property) must point
// to --key-delimiter.
func TestProduceReaderPropertyHint(t *testing.T) {
	for _, args := range [][]string{
		{"--producer-property", "parse.key=true"},
		{"-X", "key.separator=:"},
		{"--property", "parse.key=true"},
		{"--reader-property", "parse.key=true"},
	} {
		code, _, stderr := runCLI(context.Background(), nil,
			append([]string{"produce", "-b", "127.0.0.1:9092", "-t", "t"}, args...)...)
		if code != exitUsage || !strings.Contains(stderr, "--key-delimiter SEP") {
			t.Errorf("%q: exit %d, stderr does not point to --key-delimiter:\n%s", args, code, stderr)
		}
	}
	var ce *kprod.ConfigError
	pf := producerFlags{x: []string{"parse.key=true"}}
	_, err := pf.build(nil)
	if err = readerPropertyHint(err); !errors.As(err, &ce) || ce.Property != "parse.key" {
		t.Errorf("the hint hides the *kprod.ConfigError: %v", err)
	}
}

// A first Metadata answer slower than a short max.block.ms fails the
// first line only (as Java's console producer does): the cluster is
// reachable, so the lines after it are sent, not dropped.
func TestProduceSlowFirstMetadataFailsOneLine(t *testing.T) {
	c := newTestCluster(t, 1, "t")
	var slowed atomic.Bool
	c.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if slowed.CompareAndSwap(false, true) {
			time.Sleep(400 * time.Millisecond) // the first answer only
		}
		return nil, nil, false
	})
	const n = 20
	code, _, stderr := runCLI(context.Background(), strings.NewReader(strings.Repeat("line\n", n)), "produce",
		"-b", c.ListenAddrs()[0], "-t", "t", "-X", "max.block.ms=250")
	t.Logf("exit %d\n%s", code, stderr)
	if strings.Contains(stderr, "not sent") || !strings.Contains(stderr, "records sent") ||
		strings.Contains(stderr, "stopped reading stdin") {
		t.Errorf("a reachable cluster with the topic: lines after the first were dropped:\n%s", stderr)
	}
}

// firstClientID listens on a local port and returns its address and the
// client.id of the first request a client sends there (the request
// header: size, api key, version, correlation id, client id).
func firstClientID(t *testing.T) (string, <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ids := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		var hdr [14]byte // size(4) key(2) version(2) corr(4) id length(2)
		if _, err := io.ReadFull(conn, hdr[:]); err != nil {
			return
		}
		id := make([]byte, max(int16(binary.BigEndian.Uint16(hdr[12:])), 0))
		if _, err := io.ReadFull(conn, id); err != nil {
			return
		}
		ids <- string(id)
	}()
	return ln.Addr().String(), ids
}

// TestProduceDefaultClientID: kafka-console-producer names its producer
// console-producer unless client.id is given (ConsoleProducer's
// producerProps); kprod produce sent the library's kprod-producer-N, so
// client-id quotas and logs set up for the Java tool missed it.
func TestProduceDefaultClientID(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "console-producer"},
		{[]string{"-X", "client.id=mine"}, "mine"},
	} {
		addr, ids := firstClientID(t)
		args := append([]string{"produce", "-b", addr, "-t", "t", "-X", "max.block.ms=300"}, tc.args...)
		runCLI(context.Background(), strings.NewReader("x\n"), args...)
		select {
		case id := <-ids:
			if id != tc.want {
				t.Errorf("%q: client.id %q, want %q", tc.args, id, tc.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%q: no request reached the listener", tc.args)
		}
	}
}

// TestProduceUnsupportedReaderPropertyHint: kafka-console-producer's
// other reader properties (LineMessageReader's parse.headers,
// headers.*, null.marker, ignore.error) and --reader-config were refused
// as an unknown producer property or flag, as if misspelt, without saying
// that kprod produce has no such parsing or what it has instead.
func TestProduceUnsupportedReaderPropertyHint(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-X", "parse.headers=true"}, "-H KEY=VALUE"},
		{[]string{"--producer-property", "headers.delimiter=|"}, "-H KEY=VALUE"},
		{[]string{"-X", "headers.separator=;"}, "-H KEY=VALUE"},
		{[]string{"-X", "headers.key.separator=="}, "-H KEY=VALUE"},
		{[]string{"-X", "null.marker=NULL"}, "no null marker"},
		{[]string{"-X", "ignore.error=true"}, "fails alone"},
		{[]string{"--property", "parse.headers=true"}, "-H KEY=VALUE"},
		{[]string{"--reader-property", "null.marker=NULL"}, "null.marker"},
		{[]string{"--reader-config", "reader.properties"}, "--key-delimiter SEP"},
	} {
		code, _, stderr := runCLI(context.Background(), nil,
			append([]string{"produce", "-b", "127.0.0.1:9092", "-t", "t"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "did you mean") {
			t.Errorf("%q: exit %d, stderr does not say %q:\n%s", tc.args, code, tc.want, stderr)
		}
	}
}
