package kprod

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kprod/kprod/kerr"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newSmallMessageFake is a 3-broker kfake cluster whose brokers refuse
// batches larger than maxMessage bytes, with topic "t" of one partition.
func newSmallMessageFake(t *testing.T, maxMessage int) *kfake.Cluster {
	return newFake(t, 1, kfake.BrokerConfigs(map[string]string{"message.max.bytes": fmt.Sprint(maxMessage)}))
}

// splitConfig makes batches of up to 64 KiB that linger long enough to
// fill: far above the brokers' limit, as when batch.size is set above a
// topic's max.message.bytes.
func splitConfig(c *kfake.Cluster) Config {
	cfg := testConfig(c)
	cfg.BatchSize = 64 << 10
	cfg.Linger = 200 * time.Millisecond
	return cfg
}

// sendNumbered sends n records of size bytes (each value starts with its
// index) to partition 0 of "t", and returns them with their outcomes.
func sendNumbered(t *testing.T, p *Producer, n, size int) ([]*Record, *outcomes) {
	t.Helper()
	o := newOutcomes(t)
	recs := make([]*Record, n)
	for i := range recs {
		v := bytes.Repeat([]byte{'x'}, size)
		copy(v, fmt.Sprintf("%d:", i))
		recs[i] = (&Record{Topic: "t", Value: v}).ToPartition(0)
		p.Send(context.Background(), recs[i], o.cb())
	}
	return recs, o
}

// A batch the broker refuses as too large is sent again in parts: every
// record is written, in the order sent, and Flush waits for all the parts.
func TestSplitTooLargeBatch(t *testing.T) {
	for _, idem := range []bool{true, false} {
		t.Run(fmt.Sprintf("idempotent=%v", idem), func(t *testing.T) {
			c := newSmallMessageFake(t, 2000)
			cfg := splitConfig(c)
			if !idem {
				cfg.EnableIdempotence = new(false)
				cfg.Acks = AcksLeader
			}
			p := newTestProducer(t, cfg)
			const n = 400 // about 44 KB: refused, then split up to five times
			recs, o := sendNumbered(t, p, n, 100)
			if err := p.Flush(ctxT(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			// Flush returns once every record has its outcome: the split
			// batch stays incomplete until its last part completes.
			if ok, failed := o.errCount(); ok != n || failed != 0 {
				t.Fatalf("after Flush: %d ok, %d failed, want %d ok (errors: %v)", ok, failed, n, firstErr(o))
			}
			for i, r := range recs {
				if r.Offset != int64(i) {
					t.Fatalf("record %d has offset %d: the parts of a split batch must keep the order", i, r.Offset)
				}
			}
			if m := p.Metrics(); m.BatchSplitTotal == 0 {
				t.Fatal("batch-split-total is 0 after the brokers refused 44 KB batches at 2000 bytes")
			}
		})
	}
}

// Only a record that is too large on its own fails; the records batched
// with it are written, and the idempotent producer's sequence moves past
// the failed record's gap.
func TestSplitIsolatesTooLargeRecord(t *testing.T) {
	c := newSmallMessageFake(t, 2000)
	p := newTestProducer(t, splitConfig(c))
	o := newOutcomes(t)
	var recs []*Record
	for i := range 101 {
		size := 100
		if i == 50 {
			size = 5000 // above message.max.bytes by itself
		}
		v := bytes.Repeat([]byte{'x'}, size)
		copy(v, fmt.Sprintf("%d:", i))
		r := (&Record{Topic: "t", Value: v}).ToPartition(0)
		recs = append(recs, r)
		p.Send(context.Background(), r, o.cb())
	}
	if err := p.Flush(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	last := int64(-1)
	for i, r := range recs {
		err := o.errs[r]
		if i == 50 {
			if !errors.Is(err, kerr.MessageTooLarge) || !errors.Is(err, ErrRecordTooLarge) {
				t.Fatalf("the 5000-byte record: err %v, want MESSAGE_TOO_LARGE matching ErrRecordTooLarge", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("record %d failed with the too-large one: %v", i, err)
		}
		if r.Offset <= last {
			t.Fatalf("record %d at offset %d after %d: out of order", i, r.Offset, last)
		}
		last = r.Offset
	}
}

// A transaction whose batches are split still commits every record.
func TestSplitTooLargeBatchInTransaction(t *testing.T) {
	for _, proto := range txnProtocols {
		t.Run(proto.name, func(t *testing.T) {
			c := newSmallMessageFake(t, 2000)
			p := newTxnProducer(t, splitConfig(c), "split-"+proto.name, proto.v1)
			ctx := ctxT(t, 20*time.Second)
			if err := p.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			const n = 300
			recs, o := sendNumbered(t, p, n, 100)
			if err := p.CommitTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			if ok, failed := o.errCount(); ok != n || failed != 0 {
				t.Fatalf("%d ok, %d failed, want %d ok (errors: %v)", ok, failed, n, firstErr(o))
			}
			for i := 1; i < n; i++ {
				if recs[i].Offset <= recs[i-1].Offset {
					t.Fatalf("record %d at offset %d after %d: out of order", i, recs[i].Offset, recs[i-1].Offset)
				}
			}
		})
	}
}

func firstErr(o *outcomes) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, err := range o.errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// With idempotence, a batch whose earlier attempt may have been written
// (REQUEST_TIMED_OUT: written by the leader, then not acknowledged) and
// that is then refused as too large (the topic's max.message.bytes was
// lowered meanwhile) is not split: its parts would be refused as out of
// order and, after the epoch bump, written a second time. It fails, and
// the log holds each record once.
func TestSplitNotAfterMaybeWritten(t *testing.T) {
	c := newFake(t, 1)
	p := newTestProducer(t, splitConfig(c))
	ctx := ctxT(t, 30*time.Second)
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: fkerr.RequestTimedOut}) // written, not acknowledged
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: fkerr.MessageTooLarge}) // its retry refused as too large
	const n = 10
	_, o := sendNumbered(t, p, n, 100)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, failed := o.errCount(); ok != 0 || failed != n {
		t.Fatalf("%d ok, %d failed, want the %d records of the batch failed", ok, failed, n)
	}
	if err := firstErr(o); !errors.Is(err, kerr.MessageTooLarge) || !strings.Contains(err.Error(), "may have been written") {
		t.Errorf("the batch's error: %v, want MESSAGE_TOO_LARGE saying it may have been written", err)
	}
	for i := range 5 {
		if err := p.SendSync(ctx, (&Record{Topic: "t", Value: fmt.Appendf(nil, "after-%d", i)}).ToPartition(0)); err != nil {
			t.Fatalf("a record after the failed batch: %v", err)
		}
	}
	seen := readTopic(t, c.ListenAddrs(), "t", false, 500*time.Millisecond, func(m map[string]int) bool { return len(m) >= 1+n+5 })
	for v, k := range seen {
		if k != 1 {
			t.Errorf("%.10q written %d times", v, k)
		}
	}
	if len(seen) != 1+n+5 {
		t.Errorf("%d distinct records in the log, want %d", len(seen), 1+n+5)
	}
}

// With idempotence, a batch whose earlier attempt may have been written
// is still split when the topic had refused a batch no larger than it
// before that attempt: the limit was already below its size, so that
// attempt was refused too (batch.size above the topic's max.message.bytes,
// then a timeout). Every record is written, once.
func TestSplitAfterMaybeWrittenWhenTheLimitWasKnown(t *testing.T) {
	c := newSmallMessageFake(t, 3000)
	p := newTestProducer(t, splitConfig(c))
	ctx := ctxT(t, 30*time.Second)
	// A batch refused as too large, and split: the topic's limit is known
	// to be below it.
	_, first := sendNumbered(t, p, 10, 450)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, failed := first.errCount(); failed != 0 {
		t.Fatalf("the first oversized batch: %d ok, %d failed (%v)", ok, failed, firstErr(first))
	}
	// The next one's first attempt times out (may have been written);
	// its retry is refused as too large, as its first attempt was.
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: fkerr.RequestTimedOut})
	recs, o := sendNumbered(t, p, 10, 500)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, failed := o.errCount(); failed != 0 {
		t.Fatalf("%d ok, %d failed (%v): the batch was not split", ok, failed, firstErr(o))
	}
	seen := readTopic(t, c.ListenAddrs(), "t", false, 500*time.Millisecond, func(m map[string]int) bool { return len(m) >= 20 })
	for _, r := range recs {
		if k := seen[string(r.Value)]; k != 1 {
			t.Errorf("%.10q written %d times", r.Value, k)
		}
	}
}

// The parts of a split batch hold what was encoded at Send, as Java's
// split reads its own records: a caller that reuses a value's buffer
// once Send has returned does not change what is written.
func TestSplitEncodesWhatWasSent(t *testing.T) {
	for _, codec := range []string{"none", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			c := newSmallMessageFake(t, 2000)
			cfg := splitConfig(c)
			cfg.CompressionType = codec
			p := newTestProducer(t, cfg)
			o := newOutcomes(t)
			const n = 100
			buf := make([]byte, 100)
			sent := make([]string, n)
			for i := range n {
				// Random enough not to compress below the limit.
				v := fmt.Appendf(nil, "%d:%x", i, sha256.Sum256(fmt.Append(nil, i)))
				sent[i] = string(v)
				r := (&Record{Topic: "t", Value: buf[:copy(buf, v):len(v)]}).ToPartition(0)
				p.Send(context.Background(), r, o.cb())
				copy(buf, bytes.Repeat([]byte{'Z'}, len(buf))) // reused once Send returned
			}
			if err := p.Flush(ctxT(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			if ok, failed := o.errCount(); failed != 0 {
				t.Fatalf("%d ok, %d failed (%v)", ok, failed, firstErr(o))
			}
			if p.Metrics().BatchSplitTotal == 0 {
				t.Fatal("no batch was split")
			}
			seen := readTopic(t, c.ListenAddrs(), "t", false, 500*time.Millisecond, func(m map[string]int) bool { return len(m) >= n })
			for _, v := range sent {
				if seen[v] != 1 {
					t.Fatalf("%.12q in the log %d times; %d distinct values", v, seen[v], len(seen))
				}
			}
		})
	}
}
