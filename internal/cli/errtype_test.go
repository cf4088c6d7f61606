package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kprod/kprod/kerr"
)

func TestErrorType(t *testing.T) {
	broker := &kerr.ResponseError{Err: kerr.NotEnoughReplicas, Broker: 1, Topic: "t"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: waited; last error: %w", kerr.ErrDeliveryTimeout, broker), "ErrDeliveryTimeout"},
		{fmt.Errorf("giving up after 3 retries: %w", broker), "NOT_ENOUGH_REPLICAS"},
		{fmt.Errorf("%w: topic: %w", kerr.ErrMetadataTimeout, kerr.ErrDial), "ErrMetadataTimeout"},
		{fmt.Errorf("%w %q", kerr.ErrUnknownTopic, "x"), "ErrUnknownTopic"},
		{fmt.Errorf("x: %w", kerr.ErrConnectionLost), "ErrConnectionLost"},
		{fmt.Errorf("x: %w", kerr.ErrRecordTooLarge), "ErrRecordTooLarge"},
		{&kerr.ResponseError{Err: kerr.MessageTooLarge, Broker: 1, Topic: "t"}, "MESSAGE_TOO_LARGE"},
		{fmt.Errorf("%w", context.Canceled), "context.Canceled"},
		{errors.New("something"), "other"},
	} {
		if got := errorType(tc.err); got != tc.want {
			t.Errorf("errorType(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestFailures(t *testing.T) {
	var f failures
	for i := range 8 {
		f.add(fmt.Sprintf("line %d", i), kerr.ErrRecordTooLarge)
	}
	f.add("line 9", fmt.Errorf("x: %w", kerr.ErrDeliveryTimeout))
	if f.count() != 9 {
		t.Errorf("count %d", f.count())
	}
	if got := f.summary(); got != "ErrRecordTooLarge=8, ErrDeliveryTimeout=1" {
		t.Errorf("summary %q", got)
	}
	var b strings.Builder
	f.printFirst(&b, "")
	if !strings.Contains(b.String(), "the first 5 errors of 9") || !strings.Contains(b.String(), "line 4: kprod: record too large") {
		t.Errorf("printFirst:\n%s", b.String())
	}
}

func TestStats(t *testing.T) {
	start := time.Now()
	s := newStats(start)
	for i := 1; i <= 1000; i++ {
		s.record(time.Duration(i)*time.Millisecond, 10)
	}
	line := s.windowLine(start.Add(2 * time.Second))
	if !strings.HasPrefix(line, "1000 records sent, 500.0 records/sec (0.00 MB/sec), 500.5 ms avg latency, 1000.0 ms max latency.") {
		t.Errorf("window line %q", line)
	}
	if s.windowLine(start.Add(3*time.Second)) != "" {
		t.Error("an empty window printed a line")
	}
	r := s.result(start.Add(4 * time.Second))
	if r.Records != 1000 || r.Bytes != 10000 || r.RecordsPerSec != 250 || r.AvgLatencyMs != 500.5 || r.MaxLatencyMs != 1000 {
		t.Errorf("result %+v", r)
	}
	// HDR with 3 significant digits: within 0.1%.
	for _, c := range []struct{ got, want float64 }{{r.P50Ms, 500}, {r.P95Ms, 950}, {r.P99Ms, 990}, {r.P999Ms, 999}} {
		if c.got < c.want*0.999 || c.got > c.want*1.001 {
			t.Errorf("percentile %v, want %v", c.got, c.want)
		}
	}
	var b strings.Builder
	r.printTotal(&b, "")
	if !strings.HasPrefix(b.String(), "1000 records sent, 250.000000 records/sec (0.00 MB/sec), 500.50 ms avg latency, 1000.00 ms max latency, 500 ms 50th, 950 ms 95th, 990 ms 99th, 999 ms 99.9th.") {
		t.Errorf("total line %q", b.String())
	}
	if empty := newStats(start).result(start.Add(time.Second)); empty.AvgLatencyMs != 0 || empty.P50Ms != 0 {
		t.Errorf("no records: %+v (no NaN in JSON)", empty)
	}
}

func TestPayloadGen(t *testing.T) {
	g := newPayloadGen(&perfCmd{recordSize: 100}, nil)
	a, b := g.next(0), g.next(1)
	if len(a) != 100 || len(b) != 100 || string(a) == string(b) {
		t.Fatalf("payloads %q %q", a, b)
	}
	for _, c := range a {
		if c < 'A' || c > 'Z' {
			t.Fatalf("byte %q outside A-Z", c)
		}
	}
	if cap(a) != 100 {
		t.Errorf("cap %d: appending to a payload would write into the next", cap(a))
	}
	if again := newPayloadGen(&perfCmd{recordSize: 100}, nil).next(0); string(again) != string(a) {
		t.Error("the payloads are not reproducible (fixed seed, as Java's)")
	}
	m := newPayloadGen(&perfCmd{recordSize: 100, payloadMonotonic: true}, nil)
	if string(m.next(41)) != "41" {
		t.Error("monotonic payload")
	}
}

// A full buffer stops a run only when nothing was acknowledged for
// max.block.ms (and at least stallAfter); the cluster-wide errors always
// do; a record's own failure never does.
func TestStopsTheRun(t *testing.T) {
	full := fmt.Errorf("x: %w", kerr.ErrBufferFull)
	var never, recent, old progress
	recent.mark()
	old.markAt(monoNow() - time.Minute)
	for _, tc := range []struct {
		name     string
		err      error
		lastAck  *progress
		maxBlock time.Duration
		want     bool
	}{
		{"full, nothing acknowledged yet", full, &never, time.Second, true},
		{"full, the run started just now", full, &recent, 10 * time.Millisecond, false},
		{"full, acknowledged just now", full, &recent, 20 * time.Millisecond, false},
		{"full, last acknowledged a minute ago", full, &old, 20 * time.Millisecond, true},
		{"full, within a long max.block.ms", full, &old, 2 * time.Minute, false},
		{"unknown topic", fmt.Errorf("%w %q", kerr.ErrUnknownTopic, "x"), &recent, time.Second, true},
		{"metadata timeout, brokers unreachable", fmt.Errorf("%w: t: %w", kerr.ErrMetadataTimeout, kerr.ErrDial), &recent, time.Second, true},
		{"metadata timeout, acknowledged just now", fmt.Errorf("%w: t", kerr.ErrMetadataTimeout), &recent, 20 * time.Millisecond, false},
		{"metadata timeout, nothing acknowledged yet", fmt.Errorf("%w: t", kerr.ErrMetadataTimeout), &never, time.Second, true},
		{"metadata timeout, last acknowledged a minute ago", fmt.Errorf("%w: t", kerr.ErrMetadataTimeout), &old, 20 * time.Millisecond, true},
		{"partition never appeared, acknowledged just now", fmt.Errorf("%w: t has 2 partitions (%w)", kerr.ErrUnknownPartition, kerr.ErrMetadataTimeout), &recent, 20 * time.Millisecond, true},
		{"too large", fmt.Errorf("x: %w", kerr.ErrRecordTooLarge), &never, time.Second, false},
		{"credentials refused", fmt.Errorf("x: %w", kerr.ErrAuthentication), &recent, time.Second, true},
		{"certificate refused", fmt.Errorf("x: %w", kerr.ErrTLS), &recent, time.Second, true},
		{"TLS handshake timed out", fmt.Errorf("x: %w: %w", kerr.ErrTLS, kerr.ErrDial), &recent, time.Second, false},
		{"fatal", fmt.Errorf("x: %w", kerr.ErrFatal), &recent, time.Second, true},
	} {
		if got := stopsTheRun(tc.err, tc.lastAck, tc.maxBlock); got != tc.want {
			t.Errorf("%s: stopsTheRun = %v, want %v", tc.name, got, tc.want)
		}
	}
}
