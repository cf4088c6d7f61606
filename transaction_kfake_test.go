package kprod

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnProtocols runs a test with transactions v1 (AddPartitionsToTxn,
// Produce <= v11) and v2 (KIP-890, the cluster's default).
var txnProtocols = []struct {
	name string
	v1   bool
}{{"v1", true}, {"v2", false}}

func newTxnProducer(t *testing.T, cfg Config, id string, v1 bool) *Producer {
	t.Helper()
	cfg.TransactionalID = id
	p := newTestProducer(t, cfg)
	p.txn.forceV1 = v1
	return p
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// sendCommit sends n records to each of topic's first partitions in p's
// transaction, commits it, and fails the test if the commit or a record
// failed.
func sendCommit(t *testing.T, ctx context.Context, p *Producer, topic string, partitions int32, n int, prefix string) {
	t.Helper()
	wait := sendTxn(t, p, topic, partitions, n, prefix)
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if errs := wait(); len(errs) > 0 {
		t.Fatal(errs[0])
	}
}

// sendTxn sends n records to each of partitions partitions of topic, with
// values prefix:partition:i, and returns a wait func for their callbacks'
// errors.
func sendTxn(t *testing.T, p *Producer, topic string, partitions int32, n int, prefix string) func() []error {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range n {
		for part := range partitions {
			r := &Record{Topic: topic, Value: fmt.Appendf(nil, "%s:%d:%d", prefix, part, i)}
			r.ToPartition(part)
			wg.Add(1)
			p.Send(context.Background(), r, func(_ *Record, err error) {
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				wg.Done()
			})
		}
	}
	return func() []error {
		wg.Wait()
		return errs
	}
}

// readTopic reads topic with isolation level read_committed (or
// read_uncommitted) until done says it has what it waits for and the read
// has reached the end of every partition: for read_committed, with no
// transaction open there any more (its last stable offset is its high
// watermark); while one stays open, once nothing new came for quiet. It
// gives up after 60 s, and returns how often each value was seen.
func readTopic(t *testing.T, brokers []string, topic string, committed bool, quiet time.Duration, done func(map[string]int) bool) map[string]int {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	// Control records (transaction markers) come too, so that the read's
	// position can be set against the partitions' end offsets.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]int{}
	next := map[int32]int64{} // per partition: the offset after the last record read
	deadline := time.Now().Add(60 * time.Second)
	last := time.Now()
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
			last = time.Now()
			if !r.Attrs.IsControl() {
				seen[string(r.Value)]++
			}
		})
		if !done(seen) {
			continue
		}
		ends, err := topicEndOffsets(cl, topic, committed)
		if err != nil {
			t.Logf("reading %s: %v", topic, err)
			continue
		}
		settled := true
		if committed {
			hwms, err := topicEndOffsets(cl, topic, false)
			if err != nil {
				t.Logf("reading %s: %v", topic, err)
				continue
			}
			settled = maps.Equal(ends, hwms)
		}
		reached := true
		for p, end := range ends {
			reached = reached && next[p] >= end
		}
		if reached && (settled || time.Since(last) >= quiet) {
			return seen
		}
	}
	t.Fatalf("reading %s (read_committed=%v): gave up after 60s with %d values", topic, committed, len(seen))
	return nil
}

// checkTxnVisibility asserts that every value with one of the committed
// prefixes is visible to read_committed exactly once and no value with
// another prefix is.
func checkTxnVisibility(t *testing.T, brokers []string, topic string, committed []string, perPrefix int) {
	t.Helper()
	want := len(committed) * perPrefix
	seen := readTopic(t, brokers, topic, true, 1500*time.Millisecond, func(m map[string]int) bool { return len(m) >= want })
	got := 0
	for v, n := range seen {
		prefix, _, _ := strings.Cut(v, ":")
		ok := false
		for _, c := range committed {
			ok = ok || c == prefix
		}
		if !ok {
			t.Errorf("%q (%d times) is visible to read_committed, but its transaction did not commit", v, n)
			continue
		}
		if n != 1 {
			t.Errorf("%q seen %d times", v, n)
		}
		got++
	}
	if got != want {
		t.Errorf("read_committed saw %d committed values, want %d", got, want)
	}
}

func TestTxnStateErrors(t *testing.T) {
	c := newFake(t, 3)
	cfg := testConfig(c)

	plain := newTestProducer(t, cfg)
	if err := plain.InitTransactions(ctxT(t, 5*time.Second)); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("InitTransactions without transactional.id: %v, want ErrTransactionState", err)
	}

	p := newTxnProducer(t, cfg, "state-errors", false)
	sendErr := func() error {
		ch := make(chan error, 1)
		p.Send(context.Background(), StringRecord("t", "", "x"), func(_ *Record, err error) { ch <- err })
		select {
		case err := <-ch:
			return err
		case <-time.After(5 * time.Second):
			t.Fatal("Send outside a transaction did not call back at once")
			return nil
		}
	}
	if err := sendErr(); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("Send before InitTransactions: %v", err)
	}
	if err := p.BeginTransaction(); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("BeginTransaction before InitTransactions: %v", err)
	}
	ctx := ctxT(t, 10*time.Second)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.InitTransactions(ctx); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("second InitTransactions: %v", err)
	}
	if err := sendErr(); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("Send outside a transaction: %v", err)
	} else {
		t.Logf("Send outside a transaction: %v", err)
	}
	if err := p.CommitTransaction(ctx); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("CommitTransaction outside a transaction: %v", err)
	}
	if err := p.AbortTransaction(ctx); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("AbortTransaction outside a transaction: %v", err)
	}
	if err := p.SendOffsetsToTransaction(ctx, map[string]map[int32]Offset{"t": {0: {Offset: 1, LeaderEpoch: -1}}}, NewGroupMetadata("g")); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("SendOffsetsToTransaction outside a transaction: %v", err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("second BeginTransaction: %v", err)
	}
	// An empty transaction commits without a request.
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("empty commit: %v", err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := sendErr(); err != nil {
		t.Fatalf("Send inside a transaction: %v", err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestTxnCommitAndAbortKfake: transactions over 6 partitions, committed
// and aborted in turn; read_committed sees exactly the committed ones,
// and the requests are the protocol version's.
func TestTxnCommitAndAbortKfake(t *testing.T) {
	for _, proto := range txnProtocols {
		t.Run(proto.name, func(t *testing.T) {
			c := newFake(t, 6)
			var mu sync.Mutex
			var addParts, produces, badProduce int
			var maxProduceV int16
			c.ControlKey(int16(kmsg.AddPartitionsToTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				mu.Lock()
				addParts++
				mu.Unlock()
				return nil, nil, false
			})
			c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				req := r.(*kmsg.ProduceRequest)
				mu.Lock()
				defer mu.Unlock()
				produces++
				maxProduceV = max(maxProduceV, req.Version)
				for _, rt := range req.Topics {
					for _, rp := range rt.Partitions {
						// attributes are at offset 21 of the batch; bit 4 is transactional
						if req.TransactionID == nil || *req.TransactionID != "commit-abort" || rp.Records[22]&0x10 == 0 {
							badProduce++
						}
					}
				}
				return nil, nil, false
			})
			cfg := testConfig(c)
			cfg.Linger = 5 * time.Millisecond
			p := newTxnProducer(t, cfg, "commit-abort", proto.v1)
			ctx := ctxT(t, 30*time.Second)
			if err := p.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			var committed []string
			for i := range 6 {
				prefix := fmt.Sprintf("txn%d", i)
				if err := p.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				wait := sendTxn(t, p, "t", 6, 50, prefix)
				if i%2 == 0 {
					if err := p.CommitTransaction(ctx); err != nil {
						t.Fatalf("commit %d: %v", i, err)
					}
					if errs := wait(); len(errs) > 0 {
						t.Fatalf("commit %d: %d records failed: %v", i, len(errs), errs[0])
					}
					committed = append(committed, prefix)
				} else {
					if err := p.AbortTransaction(ctx); err != nil {
						t.Fatalf("abort %d: %v", i, err)
					}
					for _, err := range wait() {
						if !errors.Is(err, ErrTransactionAborted) {
							t.Fatalf("a record of aborted transaction %d failed with %v, want ErrTransactionAborted", i, err)
						}
					}
				}
			}
			checkTxnVisibility(t, c.ListenAddrs(), "t", committed, 6*50)
			mu.Lock()
			defer mu.Unlock()
			if badProduce > 0 {
				t.Errorf("%d partitions produced without the transactional id or attribute", badProduce)
			}
			if proto.v1 && (maxProduceV > 11 || addParts == 0) {
				t.Errorf("v1: Produce up to v%d (want <= 11), %d AddPartitionsToTxn (want > 0)", maxProduceV, addParts)
			}
			if !proto.v1 && (maxProduceV < 12 || addParts > 0) {
				t.Errorf("v2: Produce up to v%d (want >= 12), %d AddPartitionsToTxn (want 0)", maxProduceV, addParts)
			}
			t.Logf("%d produce requests up to v%d, %d AddPartitionsToTxn", produces, maxProduceV, addParts)
		})
	}
}

// TestTxnCoordinatorErrorsRetried: CONCURRENT_TRANSACTIONS and
// COORDINATOR_NOT_AVAILABLE from the transaction coordinator (on every
// request of a transaction's life) are retried, and the transaction
// commits.
func TestTxnCoordinatorErrorsRetried(t *testing.T) {
	for _, proto := range txnProtocols {
		t.Run(proto.name, func(t *testing.T) {
			c := newFake(t, 3)
			keys := []kmsg.Key{kmsg.InitProducerID, kmsg.EndTxn, kmsg.FindCoordinator}
			if proto.v1 {
				keys = append(keys, kmsg.AddPartitionsToTxn)
			}
			var handles []*kfake.FaultHandle
			for _, k := range keys {
				errs := []*fkerr.Error{fkerr.ConcurrentTransactions, fkerr.CoordinatorNotAvailable}
				if k == kmsg.FindCoordinator {
					errs = []*fkerr.Error{fkerr.CoordinatorNotAvailable}
				}
				for _, e := range errs {
					// TopLevel only where the response has a top-level
					// code at the version used: kfake would otherwise
					// answer success to the client and skip the request.
					top := k == kmsg.InitProducerID || k == kmsg.EndTxn
					handles = append(handles, c.Fault(kfake.Fault{Keys: []kmsg.Key{k}, TxnID: "retried", Err: e, Count: 2, TopLevel: top}))
				}
			}
			cfg := testConfig(c)
			cfg.RetryBackoff = 10 * time.Millisecond
			p := newTxnProducer(t, cfg, "retried", proto.v1)
			ctx := ctxT(t, 30*time.Second)
			if err := p.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			sendCommit(t, ctx, p, "t", 3, 10, "r")
			for i, h := range handles {
				if h.Hits() == 0 {
					t.Errorf("fault %d was never hit", i)
				}
			}
			checkTxnVisibility(t, c.ListenAddrs(), "t", []string{"r"}, 30)
		})
	}
}

// TestTxnFencedKfake: a second producer with the same transactional.id
// fences the first; the first gets ErrProducerFenced on its commit and
// on every later call, and its transaction never becomes visible.
func TestTxnFencedKfake(t *testing.T) {
	for _, proto := range txnProtocols {
		t.Run(proto.name, func(t *testing.T) {
			c := newFake(t, 3)
			cfg := testConfig(c)
			ctx := ctxT(t, 30*time.Second)
			p1 := newTxnProducer(t, cfg, "fenced", proto.v1)
			if err := p1.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p1.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if errs := sendTxn(t, p1, "t", 3, 10, "zombie"); p1.Flush(ctx) != nil || len(errs()) > 0 {
				t.Fatal("first producer's records failed")
			}
			p2 := newTxnProducer(t, cfg, "fenced", proto.v1)
			if err := p2.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			// kfake is more lenient than Kafka with the zombie's old
			// epoch: it takes an EndTxn v5 one epoch behind for a retry,
			// and accepts any older epoch in InitProducerId (Kafka only
			// its current or last one). Answer the zombie's
			// coordinator requests as Kafka does.
			p1.txn.mu.Lock()
			zpid, zepoch := p1.txn.pid, p1.txn.epoch
			p1.txn.mu.Unlock()
			c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn, kmsg.InitProducerID}, Err: fkerr.ProducerFenced, Count: -1, TopLevel: true,
				When: func(r kmsg.Request) bool {
					switch r := r.(type) {
					case *kmsg.EndTxnRequest:
						return r.ProducerID == zpid && r.ProducerEpoch == zepoch
					case *kmsg.InitProducerIDRequest:
						return r.ProducerID == zpid && r.ProducerEpoch == zepoch
					}
					return false
				}})
			want := ErrProducerFenced
			err := p1.CommitTransaction(ctx)
			if !errors.Is(err, want) || !errors.Is(err, ErrFatal) {
				t.Fatalf("zombie commit: %v, want %v", err, want)
			}
			t.Logf("zombie commit: %v", err)
			if err := p1.BeginTransaction(); !errors.Is(err, want) {
				t.Fatalf("zombie BeginTransaction: %v", err)
			}
			if err := p1.AbortTransaction(ctx); !errors.Is(err, want) {
				t.Fatalf("zombie AbortTransaction: %v", err)
			}
			if errs := sendTxn(t, p1, "t", 1, 1, "zombie2")(); len(errs) != 1 || !errors.Is(errs[0], want) {
				t.Fatalf("zombie Send: %v", errs)
			}
			if err := p2.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			sendCommit(t, ctx, p2, "t", 3, 10, "new")
			checkTxnVisibility(t, c.ListenAddrs(), "t", []string{"new"}, 30)
		})
	}
}

// TestTxnProduceErrorAbortable: a record that fails for good makes the
// transaction abortable: the commit fails with ErrTransactionAbortable
// (and so does Send), the abort succeeds, and the next transaction
// commits.
func TestTxnProduceErrorAbortable(t *testing.T) {
	for _, proto := range txnProtocols {
		t.Run(proto.name, func(t *testing.T) {
			c := newFake(t, 3)
			cfg := testConfig(c)
			ctx := ctxT(t, 30*time.Second)
			p := newTxnProducer(t, cfg, "abortable", proto.v1)
			if err := p.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Partitions: []int32{1}, Err: fkerr.InvalidRecord})
			wait := sendTxn(t, p, "t", 3, 5, "bad")
			err := p.CommitTransaction(ctx)
			if !errors.Is(err, ErrTransactionAbortable) {
				t.Fatalf("commit after a failed record: %v, want ErrTransactionAbortable", err)
			}
			t.Logf("commit: %v", err)
			if h.Hits() != 1 {
				t.Fatalf("fault hits %d", h.Hits())
			}
			if errs := wait(); len(errs) == 0 {
				t.Fatal("no record failed")
			}
			if err := sendTxn(t, p, "t", 1, 1, "late")(); len(err) != 1 || !errors.Is(err[0], ErrTransactionAbortable) {
				t.Fatalf("Send in an abortable transaction: %v", err)
			}
			if err := p.AbortTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			wait = sendTxn(t, p, "t", 3, 5, "good")
			if err := p.CommitTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			if errs := wait(); len(errs) > 0 {
				t.Fatal(errs[0])
			}
			checkTxnVisibility(t, c.ListenAddrs(), "t", []string{"good"}, 15)
		})
	}
}

// TestTxnSendOffsetsKfake: offsets sent in a committed transaction are
// the group's committed offsets; those of an aborted one are not.
func TestTxnSendOffsetsKfake(t *testing.T) {
	for _, proto := range txnProtocols {
		t.Run(proto.name, func(t *testing.T) {
			c := newFake(t, 3)
			cfg := testConfig(c)
			ctx := ctxT(t, 30*time.Second)
			p := newTxnProducer(t, cfg, "offsets", proto.v1)
			if err := p.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			group := "g-" + proto.name
			run := func(offset int64, commit bool) {
				t.Helper()
				if err := p.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				sent := sendTxn(t, p, "t", 1, 1, "o")
				offs := map[string]map[int32]Offset{"t": {0: {Offset: offset, LeaderEpoch: 0, Metadata: "m"}, 2: NewOffset(offset * 2)}}
				if err := p.SendOffsetsToTransaction(ctx, offs, NewGroupMetadata(group)); err != nil {
					t.Fatal(err)
				}
				end := p.CommitTransaction
				if !commit {
					end = p.AbortTransaction
				}
				if err := end(ctx); err != nil {
					t.Fatal(err)
				}
				for _, err := range sent() {
					if commit || !errors.Is(err, ErrTransactionAborted) {
						t.Fatalf("the transaction's record (commit %v): %v", commit, err)
					}
				}
			}
			var epochs sync.Map // partition → leader epoch sent
			c.ControlKey(int16(kmsg.TxnOffsetCommit), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				for _, rt := range r.(*kmsg.TxnOffsetCommitRequest).Topics {
					for _, rp := range rt.Partitions {
						epochs.Store(rp.Partition, rp.LeaderEpoch)
					}
				}
				return nil, nil, false
			})
			run(7, true)
			run(9, false)
			for part, want := range map[int32]int32{0: 0, 2: -1} { // NewOffset: no epoch
				if got, _ := epochs.Load(part); got != want {
					t.Errorf("TxnOffsetCommit sent leader epoch %v for partition %d, want %d", got, part, want)
				}
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Group = group
			req.RequireStable = true
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			got := map[int32]int64{}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					got[rp.Partition] = rp.Offset
				}
			}
			for _, rg := range resp.Groups {
				for _, rt := range rg.Topics {
					for _, rp := range rt.Partitions {
						got[rp.Partition] = rp.Offset
					}
				}
			}
			if got[0] != 7 || got[2] != 14 {
				t.Fatalf("committed offsets %v, want partition 0 at 7 and 2 at 14", got)
			}
		})
	}
}

// TestTxnCloseAbortsOpenTransaction: Close with a transaction open
// aborts it (as the Java client does), failing what was not sent with
// ErrTransactionAborted.
func TestTxnCloseAbortsOpenTransaction(t *testing.T) {
	c := newFake(t, 3)
	var mu sync.Mutex
	var endTxns []bool
	c.ControlKey(int16(kmsg.EndTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		endTxns = append(endTxns, r.(*kmsg.EndTxnRequest).Commit)
		mu.Unlock()
		return nil, nil, false
	})
	cfg := testConfig(c)
	cfg.TransactionalID = "close"
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	wait := sendTxn(t, p, "t", 3, 10, "closed")
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	unsent := sendTxn(t, p, "t", 3, 1, "unsent") // may or may not be sent before Close
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if errs := wait(); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	// Each of these got its callback (wait returns only then), and a
	// failure, if any, says the transaction was aborted.
	for _, err := range unsent() {
		if !errors.Is(err, ErrTransactionAborted) && !errors.Is(err, ErrAborted) {
			t.Fatalf("a record of the aborted transaction failed with %v, want ErrTransactionAborted or ErrAborted", err)
		}
	}
	mu.Lock()
	ends := slices.Clone(endTxns)
	mu.Unlock()
	if len(ends) != 1 || ends[0] {
		t.Fatalf("EndTxn requests (commit?) %v, want one abort", ends)
	}
	// A committed transaction after it, so that the read below is done
	// only once it has read past the aborted one.
	p2 := beginTxn(t, c, testConfig(c), "close", false)
	sendCommit(t, ctx, p2, "t", 3, 1, "after")
	checkTxnVisibility(t, c.ListenAddrs(), "t", []string{"after"}, 3)
}

// BenchmarkTxnAppend is BenchmarkAppend inside one transaction: the
// transactional checks on the send path must not allocate.
func BenchmarkTxnAppend(b *testing.B) {
	ctx := context.Background()
	p := benchProducer(b, func(cfg *Config) { cfg.TransactionalID = "bench" }, func(p *Producer) error {
		if err := p.InitTransactions(ctx); err != nil {
			return err
		}
		return p.BeginTransaction()
	})
	sendLoop(b, p, func() error { return p.CommitTransaction(ctx) })
}
