package kprod

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/kprod/kprod/kerr"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMetrics(t *testing.T) {
	c := newFake(t, 3)
	cfg := testConfig(c)
	cfg.RetryBackoff = 5 * time.Millisecond
	p := newTestProducer(t, cfg)
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: fkerr.NotEnoughReplicas, Count: 2})
	const n = 3000
	val := make([]byte, 100)
	for i := 0; i < n; i++ {
		p.Send(context.Background(), &Record{Topic: "t", Value: val}, nil)
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A record that fails before it is buffered is not "sent", but it is
	// an error (Java's send records it in the errors sensor).
	p.Send(context.Background(), &Record{Topic: "t", Value: make([]byte, 2<<20)}, nil)

	m := p.Metrics()
	if m.RecordSendTotal < n || m.Topics["t"].RecordSendTotal != m.RecordSendTotal {
		t.Fatalf("record-send-total %d (topic %d), want ≥ %d", m.RecordSendTotal, m.Topics["t"].RecordSendTotal, n)
	}
	if m.RecordRetryTotal == 0 || m.Topics["t"].RecordRetryTotal != m.RecordRetryTotal {
		t.Fatalf("record-retry-total %d after two failed produce requests", m.RecordRetryTotal)
	}
	if m.RecordErrorTotal != 1 || m.Topics["t"].RecordErrorTotal != 0 {
		t.Fatalf("record-error-total %d (topic %d), want 1 (0): the too-large record", m.RecordErrorTotal, m.Topics["t"].RecordErrorTotal)
	}
	if m.RecordSizeAvg < 100 || m.RecordSizeAvg > 120 || m.RecordSizeMax < m.RecordSizeAvg {
		t.Fatalf("record-size-avg %.1f max %.1f for 100-byte values", m.RecordSizeAvg, m.RecordSizeMax)
	}
	if m.RequestTotal == 0 || m.BatchSizeAvg <= 0 || m.RecordsPerRequestAvg <= 1 || m.RequestLatencyAvg <= 0 {
		t.Fatalf("request metrics not counted: %+v", m)
	}
	if m.BufferTotalBytes != cfg.BufferMemory || m.BufferAvailableBytes <= 0 || m.BufferAvailableBytes > cfg.BufferMemory {
		t.Fatalf("buffer-total-bytes %d available %d", m.BufferTotalBytes, m.BufferAvailableBytes)
	}
	if m.CompressionRateAvg < 0.99 || m.CompressionRateAvg > 1.01 {
		t.Fatalf("compression-rate-avg %.3f without compression, want 1", m.CompressionRateAvg)
	}
	for _, name := range []string{"record-send-rate", "byte-rate", "request-latency-max", "records-per-request-avg",
		"record-queue-time-avg", "produce-throttle-time-max", "requests-in-flight", "bufferpool-wait-time-ns-total",
		"record-send-total{topic=t}"} {
		if _, ok := m.Map()[name]; !ok {
			t.Fatalf("Map() has no %q", name)
		}
	}
	time.Sleep(1100 * time.Millisecond)
	for i := 0; i < 100; i++ {
		p.Send(context.Background(), &Record{Topic: "t", Value: val}, nil)
	}
	p.Flush(context.Background())
	if r := p.Metrics().RecordSendRate; r <= 0 {
		t.Fatalf("record-send-rate %.1f after sending more", r)
	}
}

// Averages and maxima are Java's sampled stats (3.8 on): samples of 30 s,
// three kept, each counting until 60 s after its last value. One slow
// request leaves request-latency-max within 90 s instead of staying
// there for good.
func TestStatWindow(t *testing.T) {
	var s stat
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	check := func(now time.Duration, wantAvg, wantMax float64) {
		t.Helper()
		if avg, mx := s.read(at(now)); math.Abs(avg-wantAvg) > 1e-9 || mx != wantMax {
			t.Errorf("at %v: avg %v max %v, want %v and %v", now, avg, mx, wantAvg, wantMax)
		}
	}
	check(0, 0, 0)
	s.record(at(0), 100)
	s.record(at(10*time.Second), 1)
	check(20*time.Second, 50.5, 100)
	s.record(at(31*time.Second), 2) // a second sample
	check(40*time.Second, 103.0/3, 100)
	check(61*time.Second, 103.0/3, 100) // the first sample's last value is 51 s old: it counts
	s.record(at(62*time.Second), 4)     // a third sample
	check(70*time.Second, 3, 4)         // the first sample's last value is 60 s old
	s.record(at(95*time.Second), 8)     // a fourth, in the first sample's place
	check(100*time.Second, 6, 8)        // the second sample's last value is 69 s old
	check(200*time.Second, 0, 0)
}

// compression-rate-avg is Java's ratio: the records' compressed bytes over
// their uncompressed bytes, without the batch header; a topic appears in
// Metrics once a batch was sent to it, not for every name given to Send.
func TestMetricsCompressionAndTopics(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	cfg.CompressionType = "gzip"
	cfg.MaxBlock = 100 * time.Millisecond
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 10*time.Second)
	metadataReady(t, p, "t")
	val := bytes.Repeat([]byte("a"), 200)
	for range 20 {
		if err := p.SendSync(ctx, &Record{Topic: "t", Value: val}); err != nil {
			t.Fatal(err)
		}
	}
	// One record of 200 equal bytes (about 210 encoded) gzips to about
	// 30 bytes; counting the 61-byte header on both sides gave about 0.35.
	m := p.Metrics()
	if r := m.CompressionRateAvg; r <= 0 || r > 0.2 {
		t.Errorf("compression-rate-avg %.3f, want the records' ratio (< 0.2)", r)
	}
	if r := m.Topics["t"].CompressionRateAvg; r <= 0 || r > 0.2 {
		t.Errorf("topic compression-rate %.3f, want < 0.2", r)
	}

	// A topic that does not exist: Send fails after max.block.ms.
	if err := p.SendSync(ctx, &Record{Topic: "no-such-topic", Value: val}); err == nil {
		t.Fatal("a send to a topic that does not exist succeeded")
	}
	m = p.Metrics()
	if _, ok := m.Topics["no-such-topic"]; ok || len(m.Topics) != 1 {
		t.Errorf("topics in Metrics: %v, want only t", slices.Collect(maps.Keys(m.Topics)))
	}
	if m.RecordErrorTotal != 1 {
		t.Errorf("record-error-total %d, want 1", m.RecordErrorTotal)
	}
}

// Rates are Java's: the sum over the samples still counted (each until
// 60 s after its last value), per second since the oldest of them began,
// and per 30 s at least.
func TestStatRate(t *testing.T) {
	var s stat
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	check := func(now time.Duration, want float64) {
		t.Helper()
		if got := s.rate(at(now)); math.Abs(got-want) > 1e-9 {
			t.Errorf("at %v: rate %v, want %v", now, got, want)
		}
	}
	check(0, 0)
	s.recordN(at(0), 100, 1, 0)
	check(10*time.Second, 100.0/40) // 10 s elapsed, and a whole sample more
	s.recordN(at(25*time.Second), 50, 1, 0)
	s.recordN(at(31*time.Second), 60, 1, 0) // a second sample
	check(45*time.Second, 210.0/45)
	check(70*time.Second, 210.0/70) // the first sample's last value is 45 s old: a 70 s window
	check(86*time.Second, 60.0/55)  // now 61 s old: the second sample alone, since 31 s
	check(200*time.Second, 0)
}

// Records that an abort fails (of the transaction, or by a Close whose ctx
// ended) are not record errors, as Java's abortBatches records none; nor
// is a Send after Close.
func TestMetricsAbortedRecordsAreNotErrors(t *testing.T) {
	t.Run("transaction", func(t *testing.T) {
		c := newFake(t, 2)
		cfg := testConfig(c)
		cfg.Linger = time.Hour // the records stay queued until the abort
		p := beginTxn(t, c, cfg, "abort-metrics", false)
		ctx := ctxT(t, 30*time.Second)
		o := newOutcomes(t)
		for i := range 3 {
			p.Send(ctx, &Record{Topic: "t", Value: []byte{byte(i)}}, o.cb())
		}
		if err := p.AbortTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		o.wait(t, 10*time.Second)
		if ok, failed := o.errCount(); ok != 0 || failed != 3 {
			t.Fatalf("%d delivered, %d failed, want 0 and 3 (aborted)", ok, failed)
		}
		if m := p.Metrics(); m.RecordErrorTotal != 0 {
			t.Errorf("record-error-total %d after an abort, want 0", m.RecordErrorTotal)
		}
	})
	t.Run("forced close", func(t *testing.T) {
		c := newFake(t, 1)
		holdRequests(t, c, kmsg.Produce)
		p, err := NewProducer(testConfig(c))
		if err != nil {
			t.Fatal(err)
		}
		o := newOutcomes(t)
		p.Send(context.Background(), &Record{Topic: "t", Value: []byte("x")}, o.cb())
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if err := p.Close(ctx); !errors.Is(err, ErrAborted) {
			t.Fatalf("Close with a record held: %v, want ErrAborted", err)
		}
		o.wait(t, time.Second)
		if m := p.Metrics(); m.RecordErrorTotal != 0 {
			t.Errorf("record-error-total %d after a forced Close, want 0", m.RecordErrorTotal)
		}
		// Nor is a Send after Close (Java throws IllegalStateException,
		// which it does not count).
		var after error
		p.Send(context.Background(), &Record{Topic: "t"}, func(_ *Record, err error) { after = err })
		if !errors.Is(after, ErrClosed) {
			t.Fatalf("Send after Close: %v, want ErrClosed", after)
		}
		if m := p.Metrics(); m.RecordErrorTotal != 0 {
			t.Errorf("record-error-total %d after a Send after Close, want 0", m.RecordErrorTotal)
		}
	})
}

// The call-time totals of Java's KafkaProducerMetrics: Flush always, the
// transaction calls when they succeed, the metadata wait when a Send had
// to wait for its topic's metadata.
func TestMetricsCallTimes(t *testing.T) {
	c := newFake(t, 3)
	p := newTxnProducer(t, testConfig(c), "call-times", false)
	ctx := ctxT(t, 30*time.Second)
	if m := p.Metrics(); m.MetadataWaitTimeNsTotal != 0 || m.TxnInitTimeNsTotal != 0 {
		t.Fatalf("call times before any call: %+v", m)
	}
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	waited := p.Metrics().MetadataWaitTimeNsTotal
	if waited <= 0 {
		t.Fatalf("metadata-wait-time-ns-total %d after the first Send to a topic", waited)
	}
	offs := map[string]map[int32]Offset{"t": {0: {Offset: 1, LeaderEpoch: -1}}}
	if err := p.SendOffsetsToTransaction(ctx, offs, NewGroupMetadata("g")); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	p.Send(ctx, &Record{Topic: "t", Value: []byte("v")}, nil)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	m := p.Metrics()
	if m.MetadataWaitTimeNsTotal != waited {
		t.Errorf("metadata-wait-time-ns-total went from %d to %d: a Send with the topic's metadata at hand counted as a wait", waited, m.MetadataWaitTimeNsTotal)
	}
	for name, v := range map[string]int64{
		"txn-init-time-ns-total": m.TxnInitTimeNsTotal, "txn-begin-time-ns-total": m.TxnBeginTimeNsTotal,
		"txn-send-offsets-time-ns-total": m.TxnSendOffsetsTimeNsTotal, "txn-commit-time-ns-total": m.TxnCommitTimeNsTotal,
		"txn-abort-time-ns-total": m.TxnAbortTimeNsTotal, "flush-time-ns-total": m.FlushTimeNsTotal,
	} {
		if v <= 0 {
			t.Errorf("%s is %d after the call", name, v)
		}
		if got := m.Map()[name]; got != float64(v) {
			t.Errorf("Map()[%q] = %v, want %d", name, got, v)
		}
	}
	// A call that fails is not counted, as in Java (the time is recorded
	// after the call's result).
	if err := p.CommitTransaction(ctx); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("CommitTransaction outside a transaction: %v, want ErrTransactionState", err)
	}
	if got := p.Metrics().TxnCommitTimeNsTotal; got != m.TxnCommitTimeNsTotal {
		t.Errorf("txn-commit-time-ns-total went from %d to %d with a failed commit", m.TxnCommitTimeNsTotal, got)
	}
	if m.Closed {
		t.Error("Metrics().Closed before Close")
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !p.Metrics().Closed {
		t.Error("Metrics().Closed is false after Close returned")
	}
}

// bufferpool-wait-ratio is the share of time Sends spent waiting for
// memory, over the stat's window (Java's Meter of the wait in ns).
func TestMetricsBufferPoolWaitRatio(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	cfg.BufferMemory = 32 << 10
	cfg.BatchSize = 16 << 10
	cfg.MaxBlock = 300 * time.Millisecond
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 30*time.Second)
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("v")}); err != nil {
		t.Fatal(err) // the topic's metadata, before produce requests are held
	}
	open, held := holdCounted(t, c, kmsg.Produce)
	defer open()
	for range 2 { // two batches: all of buffer.memory
		p.Send(ctx, &Record{Topic: "t", Value: make([]byte, 15<<10)}, nil)
	}
	for deadline := time.Now().Add(10 * time.Second); held.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no produce request was sent")
		}
	}
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: make([]byte, 15<<10)}); !errors.Is(err, ErrBufferFull) {
		t.Fatalf("Send with buffer.memory in use: %v, want ErrBufferFull after max.block.ms", err)
	} else if !kerr.IsRetriable(err) {
		t.Errorf("IsRetriable(%v) = false: sent again once memory is free it may go (Java's BufferExhaustedException is retriable)", err)
	}
	m := p.Metrics()
	if m.BufferPoolWaitTimeNs < int64(300*time.Millisecond) {
		t.Errorf("bufferpool-wait-time-ns-total %d after a 300ms wait", m.BufferPoolWaitTimeNs)
	}
	// 300ms of waiting in a window of at least 30 s.
	if want := 0.3 / 30; m.BufferPoolWaitRatio < want*0.99 || m.BufferPoolWaitRatio > 2*want {
		t.Errorf("bufferpool-wait-ratio %v after a 300ms wait, want about %v", m.BufferPoolWaitRatio, want)
	}
	if got := m.Map()["bufferpool-wait-ratio"]; got != m.BufferPoolWaitRatio {
		t.Errorf("Map()[bufferpool-wait-ratio] = %v", got)
	}
}

// A transactional Send refused because no transaction is open is not a
// record error: Java's send throws IllegalStateException for it
// (TransactionManager.maybeAddPartition), which doSend does not record in
// its errors sensor, as for a Send on a closed producer. An abortable
// transaction's refusal (Java: KafkaException) still counts.
func TestMetricsSendOutsideTransactionIsNoError(t *testing.T) {
	c := newFake(t, 1)
	p := newTxnProducer(t, testConfig(c), "outside-txn", false)
	ctx := ctxT(t, 30*time.Second)
	send := func() error {
		var got error
		p.Send(ctx, &Record{Topic: "t", Value: []byte("v")}, func(_ *Record, err error) { got = err })
		return got
	}
	if err := send(); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("Send before InitTransactions: %v, want ErrTransactionState", err)
	}
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := send(); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("Send before BeginTransaction: %v, want ErrTransactionState", err)
	}
	if m := p.Metrics(); m.RecordErrorTotal != 0 {
		t.Errorf("record-error-total %d after Sends outside a transaction, want 0", m.RecordErrorTotal)
	}

	// A record too large fails in Send and makes the transaction
	// abortable; the Send after it is refused for that, and both count.
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	p.Send(ctx, &Record{Topic: "t", Value: make([]byte, testConfig(c).MaxRequestSize+1)}, nil)
	if err := send(); !errors.Is(err, ErrTransactionAbortable) {
		t.Fatalf("Send in an abortable transaction: %v, want ErrTransactionAbortable", err)
	}
	if m := p.Metrics(); m.RecordErrorTotal != 2 {
		t.Errorf("record-error-total %d after a too-large record and a Send refused for the abortable transaction, want 2", m.RecordErrorTotal)
	}
}
