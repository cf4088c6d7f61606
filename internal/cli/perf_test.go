package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kprod/kprod/internal/testcluster"
)

// TestPerfFirstRecordTooLargeDoesNotStop: perf stopped the whole run when
// the first record failed for any reason, even one of that record alone
// (ErrRecordTooLarge for a long --payload-file piece).
func TestPerfFirstRecordTooLargeDoesNotStop(t *testing.T) {
	c := newTestCluster(t, 1, "t")
	file := filepath.Join(t.TempDir(), "payloads")
	if err := os.WriteFile(file, []byte(strings.Repeat("x", 5000)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 5
	code, stdout, stderr := runCLI(context.Background(), nil, "perf", "-b", c.ListenAddrs()[0], "--topic", "t",
		"--num-records", "5", "--payload-file", file, "-X", "max.request.size=1000", "--json")
	if code != exitFail {
		t.Errorf("exit %d, want %d (records failed)\nstderr: %s", code, exitFail, stderr)
	}
	if strings.Contains(stderr, "stopped after") {
		t.Errorf("a record-only error stopped the run:\n%s", stderr)
	}
	r, _ := decodePerfJSON(t, stdout)
	if r.Sent != n || r.Failed != n || r.Errors["ErrRecordTooLarge"] != n || r.Stopped != "" {
		t.Errorf("sent %d, failed %d, errors %v, stopped %q; want every record sent and failed as too large, the run not stopped",
			r.Sent, r.Failed, r.Errors, r.Stopped)
	}
}

// TestPerfJSONWhenFirstRecordStops: perf --json printed nothing on stdout
// when the first record stopped the run (here an unknown topic).
func TestPerfJSONWhenFirstRecordStops(t *testing.T) {
	c := newTestCluster(t, 1, "exists")
	code, stdout, stderr := runCLI(context.Background(), nil, "perf", "-b", c.ListenAddrs()[0],
		"--topic", "does-not-exist", "--num-records", "1000000", "-X", "max.block.ms=300", "--json")
	if code != exitFail {
		t.Errorf("exit %d, want %d\nstderr: %s", code, exitFail, stderr)
	}
	r, raw := decodePerfJSON(t, stdout)
	if !strings.Contains(r.Stopped, "unknown topic") || r.Interrupted || r.Records != 0 || r.Sent != 1 {
		t.Errorf("stopped %q, interrupted %v, records %d, sent %d; want the unknown topic as the stop reason, not interrupted",
			r.Stopped, r.Interrupted, r.Records, r.Sent)
	}
	if _, ok := raw["interrupted"]; !ok {
		t.Errorf("the JSON output lost the interrupted field:\n%s", stdout)
	}
}

// TestPerfStoppedIsNotInterrupted: perf --json reported "interrupted":
// true when an error, not a signal, stopped the run (here a commit the
// broker refused after records were sent).
func TestPerfStoppedIsNotInterrupted(t *testing.T) {
	c := newTestCluster(t, 1, "t")
	c.ControlKey(int16(kmsg.EndTxn), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		resp := kreq.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = 90 // PRODUCER_FENCED
		return resp, nil, true
	})
	code, stdout, stderr := runCLI(context.Background(), nil, "perf", "-b", c.ListenAddrs()[0], "--topic", "t",
		"--num-records", "1000000", "--throughput", "2000", "--transaction-duration-ms", "100", "--json")
	if code != exitFail {
		t.Errorf("exit %d, want %d\nstderr: %s", code, exitFail, stderr)
	}
	r, _ := decodePerfJSON(t, stdout)
	if r.Interrupted || !strings.Contains(r.Stopped, "commit") || r.Sent < 2 {
		t.Errorf("interrupted %v, stopped %q, sent %d; want not interrupted, stopped by the commit, after records were sent\nstderr: %s",
			r.Interrupted, r.Stopped, r.Sent, stderr)
	}
	// Without a stop, the field is absent.
	code, stdout, stderr = runCLI(context.Background(), nil, "perf", "-b", c.ListenAddrs()[0], "--topic", "t",
		"--num-records", "10", "--json")
	if _, raw := decodePerfJSON(t, stdout); code != exitOK || raw["stopped"] != nil {
		t.Errorf("exit %d, stopped %s in a complete run\nstderr: %s", code, raw["stopped"], stderr)
	}
}

// TestPerfClockStartsAfterInitTransactions: with --transactional-id, the
// stats clock and the throttle started before InitTransactions, so its
// time lowered records/sec and the throttle then sent a burst. Java's
// ProducerPerformance calls initTransactions() before it takes startMs.
func TestPerfClockStartsAfterInitTransactions(t *testing.T) {
	const initDelay = 2 * time.Second
	c := newTestCluster(t, 1, "t")
	var delayed atomic.Bool
	c.ControlKey(int16(kmsg.InitProducerID), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if kreq.(*kmsg.InitProducerIDRequest).TransactionalID != nil && delayed.CompareAndSwap(false, true) {
			time.Sleep(initDelay)
		}
		return nil, nil, false // the cluster answers as usual
	})
	// 50 records at 100/s take 0.49 s once the clock starts.
	code, stdout, stderr := runCLI(context.Background(), nil, "perf", "-b", c.ListenAddrs()[0], "--topic", "t",
		"--num-records", "50", "--throughput", "100", "--transactional-id", "perf-clock", "--json")
	if code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	if !delayed.Load() {
		t.Fatal("InitTransactions sent no InitProducerID with the transactional id")
	}
	r, _ := decodePerfJSON(t, stdout)
	if r.Records != 50 || r.ElapsedSec < 0.4 || r.ElapsedSec >= 0.4+initDelay.Seconds()/2 {
		t.Errorf("%d records in %vs, want 50 throttled over about 0.5s, InitTransactions' %v left out",
			r.Records, r.ElapsedSec, initDelay)
	}
}

// SIGINT while perf waits in CommitTransaction: an interrupt, not an
// error that stopped the run, and the commit is finished within the grace.
func TestPerfInterruptDuringCommit(t *testing.T) {
	withTestGrace(t, 5*time.Second)
	c := newTestCluster(t, 1, "t")
	var inCommit atomic.Bool
	var commits atomic.Int32
	entered := make(chan struct{})
	c.ControlKey(int16(kmsg.EndTxn), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if kreq.(*kmsg.EndTxnRequest).Commit {
			commits.Add(1)
		}
		if inCommit.CompareAndSwap(false, true) {
			close(entered)
			time.Sleep(time.Second) // the commit is slow, and then not done:
			resp := kreq.ResponseKind().(*kmsg.EndTxnResponse)
			resp.ErrorCode = kerr.ConcurrentTransactions.Code // only a retry, after the interrupt, commits
			return resp, nil, true
		}
		return nil, nil, false
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-entered
		cancel() // SIGINT while CommitTransaction waits
	}()
	code, stdout, stderr := runCLI(ctx, nil, "perf", "-b", c.ListenAddrs()[0], "--topic", "t",
		"--num-records", "1000000", "--throughput", "2000", "--transaction-duration-ms", "100", "--json")
	r, _ := decodePerfJSON(t, stdout)
	if code != exitInterrupted || !r.Interrupted || r.Stopped != "" {
		t.Errorf("exit %d, interrupted %v, stopped %q; want exit %d, interrupted, not stopped\nstderr: %s",
			code, r.Interrupted, r.Stopped, exitInterrupted, stderr)
	}
	if commits.Load() < 2 {
		t.Errorf("%d commit requests: the commit was not sent again after the interrupt", commits.Load())
	}
}

// SIGINT in the middle of a transaction: its acknowledged records, which
// the summary counts as sent, are committed, not aborted by Close.
func TestPerfInterruptCommitsOpenTxn(t *testing.T) {
	withTestGrace(t, 5*time.Second)
	c := newTestCluster(t, 1, "t")
	commits, aborts := testcluster.CountEndTxn(c)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	code, stdout, stderr := runCLI(ctx, nil, "perf", "-b", c.ListenAddrs()[0], "--topic", "t",
		"--num-records", "1000000", "--throughput", "2000", "--transaction-duration-ms", "60000", "--json")
	r, _ := decodePerfJSON(t, stdout)
	if r.Records == 0 {
		t.Fatalf("no record acknowledged in 500ms: the test tests nothing\nstderr: %s", stderr)
	}
	if commits.Load() != 1 || aborts.Load() != 0 || code != exitInterrupted || r.Stopped != "" {
		t.Errorf("%d records reported sent; %d commits, %d aborts, exit %d, stopped %q: want the open transaction committed, exit %d\nstderr: %s",
			r.Records, commits.Load(), aborts.Load(), code, r.Stopped, exitInterrupted, stderr)
	}
}

// SIGINT while a transactional, unthrottled run's Send waits for buffer
// memory (the usual state of such a run against a slower cluster): that
// Send still buffers its record, so the transaction stays committable and
// is committed; exit 130.
func TestPerfInterruptWhileSendWaitsForMemory(t *testing.T) {
	withTestGrace(t, 10*time.Second)
	c := newTestCluster(t, 1, "t")
	release := make(chan struct{})
	commits, aborts := testcluster.CountEndTxn(c)
	var produces atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if produces.Add(1) > 1 { // the first record's answer lets the run go on
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(700 * time.Millisecond) // buffer.memory is full by then: a Send waits
		cancel()
		time.Sleep(100 * time.Millisecond)
		close(release)
	}()
	code, stdout, stderr := runCLI(ctx, nil, "perf", "-b", c.ListenAddrs()[0], "--topic", "t",
		"--num-records", "1000000", "--throughput", "-1", "--record-size", "1000",
		"--transaction-duration-ms", "60000", "-X", "buffer.memory=65536", "-X", "batch.size=16384", "--json")
	r, _ := decodePerfJSON(t, stdout)
	t.Logf("exit %d stdout %s stderr %s commits %d", code, stdout, stderr, commits.Load())
	if code != exitInterrupted || r.Stopped != "" || commits.Load() != 1 {
		t.Errorf("exit %d, stopped %q, %d commits, %d aborts; want exit %d, not stopped, the open transaction committed\nstderr: %s",
			code, r.Stopped, commits.Load(), aborts.Load(), exitInterrupted, stderr)
	}
}

// --record-size above max.request.size: the first record's refusal stops
// the run, saying what to do, instead of failing a million records one
// by one.
func TestPerfRecordSizeTooLarge(t *testing.T) {
	c := newTestCluster(t, 1, "t")
	code, stdout, stderr := runCLI(context.Background(), nil, "perf", "-b", c.ListenAddrs()[0], "--topic", "t",
		"--num-records", "1000000", "--record-size", "2000000", "--json")
	r, _ := decodePerfJSON(t, stdout)
	if code != exitFail || !strings.Contains(r.Stopped, "lower --record-size") || r.Sent > 10 {
		t.Errorf("exit %d, %d sent, stopped %q; want exit %d, stopped at once saying to lower --record-size\nstderr: %s",
			code, r.Sent, r.Stopped, exitFail, stderr)
	}
}

// The first record, which the run waits for (to stop at once if the
// cluster is unreachable), is flushed rather than left alone in its batch
// for linger.ms: with a linger of ten minutes the run must still finish
// (well within the test's 60 seconds).
func TestPerfFirstRecordDoesNotLinger(t *testing.T) {
	c := newTestCluster(t, 3, "t")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code, stdout, stderr := runCLI(ctx, nil, "perf", "-b", c.ListenAddrs()[0], "--topic", "t",
		"--num-records", "20000", "-X", "linger.ms=600000", "--json")
	r, _ := decodePerfJSON(t, stdout)
	if code != exitOK || r.Interrupted || r.Records != 20000 {
		t.Fatalf("exit %d, interrupted %v, %d records acknowledged: the run waited for the first record's linger.ms\n%s", code, r.Interrupted, r.Records, stderr)
	}
}

// max.block.ms=0 (Sends that never wait, which Java accepts): the records
// sent before the metadata arrives fail, and the run goes on.
func TestPerfMaxBlockZeroGoesOn(t *testing.T) {
	c := newTestCluster(t, 1, "t")
	code, stdout, stderr := runCLI(context.Background(), nil, "perf", "-b", c.ListenAddrs()[0], "--topic", "t",
		"--num-records", "2000", "--throughput", "2000", "-X", "max.block.ms=0", "--json")
	r, _ := decodePerfJSON(t, stdout)
	t.Logf("exit %d sent %d records %d failed %d stopped %q", code, r.Sent, r.Records, r.Failed, r.Stopped)
	if r.Stopped != "" || r.Records == 0 {
		t.Errorf("perf stopped after %d record(s) on a reachable cluster: %q\nstderr: %s", r.Sent, r.Stopped, stderr)
	}
}

// With --warmup-records, as Java's tool (Kafka 4.x) prints them: the
// notice on stdout, then "In steady state." once the windows are the
// steady state's, and both summary lines.
func TestPerfWarmupWindowsAreSteadyState(t *testing.T) {
	c := newTestCluster(t, 3, "t")
	code, stdout, stderr := runCLI(context.Background(), nil, "perf", "-b", c.ListenAddrs()[0], "--topic", "t",
		"--num-records", "2400", "--throughput", "1200", "--warmup-records", "600", "--reporting-interval", "400")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	notice := strings.Index(stdout, "Warmup first 600 records.")
	steady := strings.Index(stdout, "\nIn steady state.\n")
	total := strings.Index(stdout, "2400 records sent, ")
	if notice != 0 || steady < 0 || total < steady || strings.Count(stdout, "In steady state.") != 1 ||
		!strings.Contains(stdout, "1800 steady state records sent, ") {
		t.Fatalf("stdout is not Java's warmup output:\n%s", stdout)
	}
	// The windows after the announcement count steady-state records only.
	var n int64
	for _, line := range strings.Split(stdout[steady:total], "\n") {
		var k int64
		if _, err := fmt.Sscanf(line, "%d records sent,", &k); err == nil {
			n += k
		}
	}
	if n == 0 || n > 1800 {
		t.Errorf("the steady-state windows counted %d records, want 1 to 1800:\n%s", n, stdout)
	}
}
