package kprod

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kprod/kprod/kerr"
)

// Errors that must end a transaction, and the way out of them, as the
// Java client has them: a record that failed before it was buffered, a
// coordinator that lost the producer id, a partition leader that refuses
// the principal, and offsets sent while the transaction ends.

// beginTxn makes a transactional producer for c, initialised, with a
// transaction open.
func beginTxn(t *testing.T, c *kfake.Cluster, cfg Config, id string, v1 bool) *Producer {
	t.Helper()
	p := newTxnProducer(t, cfg, id, v1)
	ctx := ctxT(t, 30*time.Second)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	return p
}

// commitNext aborts the transaction left abortable, then checks that the
// next transaction commits and is visible.
func commitNext(t *testing.T, c *kfake.Cluster, p *Producer, prefix string) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("AbortTransaction: %v", err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	wait := sendTxn(t, p, "t", 3, 5, prefix)
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("the next transaction: %v", err)
	}
	if errs := wait(); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	checkTxnVisibility(t, c.ListenAddrs(), "t", []string{prefix}, 15)
}

// A record that fails in Send, before it is buffered (here: too large),
// makes the transaction abortable, as Java's send does: committing the
// others without it would break all or nothing.
func TestTxnSendFailureAbortable(t *testing.T) {
	for _, proto := range txnProtocols {
		t.Run(proto.name, func(t *testing.T) {
			c := newFake(t, 3)
			cfg := testConfig(c)
			p := beginTxn(t, c, cfg, "send-fails", proto.v1)
			wait := sendTxn(t, p, "t", 3, 2, "lost")
			big := make([]byte, cfg.MaxRequestSize+1)
			if err := p.SendSync(context.Background(), &Record{Topic: "t", Value: big}); !errors.Is(err, ErrRecordTooLarge) {
				t.Fatalf("Send of a record over max.request.size: %v", err)
			}
			err := p.CommitTransaction(ctxT(t, 30*time.Second))
			if !errors.Is(err, ErrTransactionAbortable) || !errors.Is(err, ErrRecordTooLarge) {
				t.Fatalf("CommitTransaction after a failed Send: %v, want ErrTransactionAbortable naming ErrRecordTooLarge", err)
			}
			checkAbortedRecords(t, wait())
			commitNext(t, c, p, "next")
		})
	}
}

// A coordinator that no longer knows the producer id (it expired:
// INVALID_PRODUCER_ID_MAPPING) makes the transaction abortable; the abort
// skips EndTxn, which cannot succeed, and gets an id again with
// InitProducerId, after which transactions go on (Java's
// beginCompletingTransaction).
func TestTxnLostProducerIDMapping(t *testing.T) {
	for _, proto := range txnProtocols {
		t.Run(proto.name, func(t *testing.T) {
			c := newFake(t, 3)
			var inits atomic.Int32
			c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Observe: true, Count: -1,
				When: func(kmsg.Request) bool { inits.Add(1); return true }})
			var failed atomic.Bool
			c.ControlKey(int16(kmsg.EndTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if failed.Swap(true) {
					return nil, nil, false
				}
				resp := r.ResponseKind().(*kmsg.EndTxnResponse)
				resp.SetVersion(r.GetVersion())
				resp.ErrorCode = fkerr.InvalidProducerIDMapping.Code
				return resp, nil, true
			})
			p := beginTxn(t, c, testConfig(c), "lost-id", proto.v1)
			wait := sendTxn(t, p, "t", 3, 2, "lost")
			err := p.CommitTransaction(ctxT(t, 30*time.Second))
			if !errors.Is(err, ErrTransactionAbortable) || !errors.Is(err, kerr.InvalidProducerIDMapping) {
				t.Fatalf("CommitTransaction: %v, want ErrTransactionAbortable with INVALID_PRODUCER_ID_MAPPING", err)
			}
			checkAbortedRecords(t, wait())
			before := inits.Load()
			commitNext(t, c, p, "next")
			if inits.Load() != before+1 {
				t.Errorf("the abort sent InitProducerId %d times, want once", inits.Load()-before)
			}
		})
	}
}

// A partition leader that refuses the principal
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) is fatal, as in Java: no later
// transaction could write either.
func TestTxnAuthorizationFromLeaderFatal(t *testing.T) {
	c := newFake(t, 3)
	p := beginTxn(t, c, testConfig(c), "not-allowed", false)
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Err: fkerr.TransactionalIDAuthorizationFailed})
	wait := sendTxn(t, p, "t", 1, 1, "x")
	if errs := wait(); len(errs) != 1 {
		t.Fatalf("record errors: %v", errs)
	}
	err := p.CommitTransaction(ctxT(t, 30*time.Second))
	if !errors.Is(err, ErrFatal) || !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("CommitTransaction: %v, want ErrFatal with TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}
	if err := p.BeginTransaction(); !errors.Is(err, ErrFatal) {
		t.Fatalf("BeginTransaction after a fatal error: %v", err)
	}
}

// SendOffsetsToTransaction checks the transaction again once it has the
// coordinator to itself: a transaction that ended (and a next one that
// began) while it waited does not get its offsets.
func TestTxnSendOffsetsAfterTransactionEnded(t *testing.T) {
	c := newFake(t, 3)
	p := beginTxn(t, c, testConfig(c), "offsets-late", false)
	tm := p.txn
	ctx := ctxT(t, 30*time.Second)
	if err := tm.acquire(ctx); err != nil { // another request under way
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- p.SendOffsetsToTransaction(ctx, map[string]map[int32]Offset{"t": {0: {Offset: 1}}}, GroupMetadata{GroupID: "g"})
	}()
	// It checked the state and waits for the coordinator.
	waitUntil(t, "SendOffsetsToTransaction to wait for the coordinator", func() bool { return tm.acquiring.Load() > 0 })
	tm.mu.Lock()
	tm.gen.Add(1) // what a commit and the next BeginTransaction leave
	tm.mu.Unlock()
	tm.release()
	if err := <-done; !errors.Is(err, ErrTransactionState) {
		t.Fatalf("SendOffsetsToTransaction: %v, want ErrTransactionState", err)
	}
}

// While a transaction is being aborted, the sender sends again only
// batches it sent before (their outcome settles the sequence), never one
// that was not sent yet, and nothing once the coordinator has aborted the
// transaction: under the epoch it handed out then, a batch would open a
// transaction of its own, whose records a later commit would make
// visible.
func TestTxnAbortDrainsOnlySentBatches(t *testing.T) {
	c := newFake(t, 3)
	p := beginTxn(t, c, testConfig(c), "abort-drain", false)
	s := &sender{p: p} // not the producer's: its round is the sender goroutine's
	q := &partq{}
	unsent, sent := &batch{q: q}, &batch{q: q, wire: []byte{0}}
	gen := p.txn.gen.Load()
	for _, c := range []struct {
		state   txnState
		dropAll bool
		b       *batch
		want    bool
	}{
		{txnInTransaction, false, unsent, true},
		{txnAbortable, false, unsent, false},
		{txnAbortable, false, sent, true},
		{txnAborting, false, sent, true},
		{txnAbortable, true, sent, false},
		{txnAborting, true, sent, false},
	} {
		s.txn.round = txnRound{state: c.state, gen: gen, v2: true, dropAll: c.dropAll}
		if got := s.txnMayDrain(q, c.b); got != c.want {
			t.Errorf("%v, dropAll %v, sent %v: may drain %v, want %v", c.state, c.dropAll, c.b.wire != nil, got, c.want)
		}
	}
}

// checkAbortedRecords: the records of a transaction that had to abort
// either made it into the log before (and are aborted with it, nil) or
// failed saying so; nothing else.
func checkAbortedRecords(t *testing.T, errs []error) {
	t.Helper()
	for _, err := range errs {
		if !errors.Is(err, ErrTransactionAborted) && !errors.Is(err, ErrTransactionAbortable) {
			t.Fatalf("a record of the aborted transaction: %v", err)
		}
	}
}

// InitTransactions refused for authorization, by FindCoordinator or by
// InitProducerId, leaves the producer uninitialized, as Java does: the
// error is not ErrFatal (a caller that closes on it would close a
// producer that works once the ACL is fixed), and InitTransactions again
// succeeds.
func TestTxnInitAuthorizationRetriable(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.FindCoordinator, kmsg.InitProducerID} {
		t.Run(key.Name(), func(t *testing.T) {
			c := newFake(t, 3)
			c.Fault(kfake.Fault{Keys: []kmsg.Key{key}, Err: fkerr.TransactionalIDAuthorizationFailed})
			p := newTxnProducer(t, testConfig(c), "auth-"+key.Name(), false)
			ctx := ctxT(t, 30*time.Second)
			err := p.InitTransactions(ctx)
			if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, ErrFatal) {
				t.Fatalf("InitTransactions refused by %s: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED and not ErrFatal", key.Name(), err)
			}
			if err := p.InitTransactions(ctx); err != nil {
				t.Fatalf("InitTransactions again, once allowed: %v", err)
			}
		})
	}
}

// Two InitTransactions at once: the second, once it gets its turn, finds
// the producer initialized and does not initialize it again; a
// transaction begun in between stays begun.
func TestTxnInitConcurrent(t *testing.T) {
	c := newFake(t, 3)
	release, open := gate(t)
	var inits atomic.Int32
	c.ControlKey(int16(kmsg.InitProducerID), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if inits.Add(1) == 1 {
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	p := newTxnProducer(t, testConfig(c), "init-twice", false)
	ctx := ctxT(t, 30*time.Second)
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- p.InitTransactions(ctx) }()
	waitUntil(t, "the first InitTransactions to be sent", func() bool { return inits.Load() > 0 })
	go func() { second <- p.InitTransactions(ctx) }()
	waitUntil(t, "the second InitTransactions to wait", func() bool { return p.txn.acquiring.Load() > 0 })
	open()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	// nil if it looked before BeginTransaction, else a state error.
	if err := <-second; err != nil && !errors.Is(err, ErrTransactionState) {
		t.Errorf("the second InitTransactions: %v, want nil or ErrTransactionState", err)
	}
	if n := inits.Load(); n != 1 {
		t.Errorf("%d InitProducerId requests, want 1", n)
	}
	commitNext(t, c, p, "after") // the transaction begun is still there to abort
}

// A commit cut short by its ctx, while it waits for the coordinator's
// EndTxn answer or for the transaction's records (its flush), says so
// (ErrTransactionTimeout, the ctx's error) and to call it again; calling it
// again learns the outcome.
func TestTxnCommitCutShortSaysCallAgain(t *testing.T) {
	for _, tc := range []struct {
		held kmsg.Key
		says string
	}{
		{kmsg.EndTxn, "call CommitTransaction again"},
		{kmsg.Produce, "call CommitTransaction or AbortTransaction again"},
	} {
		t.Run(tc.held.Name(), func(t *testing.T) {
			c := newFake(t, 3)
			open := holdRequests(t, c, tc.held)
			cfg := testConfig(c)
			cfg.RequestTimeout = 20 * time.Second
			p := beginTxn(t, c, cfg, "cut-short", false)
			wait := sendTxn(t, p, "t", 3, 5, "x")
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			err := p.CommitTransaction(ctx)
			if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrTransactionTimeout) || errors.Is(err, ErrFatal) || errors.Is(err, ErrTransactionAbortable) ||
				!strings.Contains(err.Error(), tc.says) {
				t.Fatalf("CommitTransaction cut short: %v, want ErrTransactionTimeout, the ctx's error and %q", err, tc.says)
			}
			open()
			if err := p.CommitTransaction(ctxT(t, 30*time.Second)); err != nil {
				t.Fatalf("CommitTransaction again: %v", err)
			}
			if errs := wait(); len(errs) > 0 {
				t.Fatal(errs[0])
			}
		})
	}
}

// EndTxn refused as fenced, then the InitProducerId that tells the
// coordinator's own abort from a newer producer cut short by the ctx: the
// producer is not fatal yet. Called again, the commit learns that the
// coordinator aborted the transaction (abortable), and the abort returns.
func TestTxnFencedRecoveryCutShortNotFatal(t *testing.T) {
	for _, proto := range txnProtocols {
		t.Run(proto.name, func(t *testing.T) {
			c := newFake(t, 3)
			p := beginTxn(t, c, testConfig(c), "fenced-cut-short", proto.v1)
			wait := sendTxn(t, p, "t", 3, 2, "x")
			fenced := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: fkerr.ProducerFenced, Count: -1})
			loading := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: fkerr.CoordinatorLoadInProgress, Count: -1})
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			err := p.CommitTransaction(ctx)
			if !errors.Is(err, ErrTransactionTimeout) || errors.Is(err, ErrFatal) {
				t.Fatalf("CommitTransaction, its fenced recovery cut short: %v, want ErrTransactionTimeout and not ErrFatal", err)
			}
			loading.Remove()
			if err := p.CommitTransaction(ctxT(t, 30*time.Second)); !errors.Is(err, ErrTransactionAbortable) {
				t.Fatalf("CommitTransaction again: %v, want ErrTransactionAbortable (the coordinator aborted it)", err)
			}
			fenced.Remove()
			if err := p.AbortTransaction(ctxT(t, 30*time.Second)); err != nil {
				t.Fatalf("AbortTransaction: %v", err)
			}
			for _, err := range wait() {
				if !errors.Is(err, ErrTransactionAborted) && err != nil {
					t.Errorf("a record of the aborted transaction: %v", err)
				}
			}
			if err := p.BeginTransaction(); err != nil {
				t.Fatalf("BeginTransaction after the recovery: %v", err)
			}
		})
	}
}

// A record refused for itself (invalid, as Java's ProducerRecord refuses
// it before any send) leaves the transaction committable: the others
// commit. Send after Close says the producer is closed, not to begin a
// transaction.
func TestTxnInvalidRecordKeepsTransaction(t *testing.T) {
	c := newFake(t, 3)
	p := beginTxn(t, c, testConfig(c), "invalid-record", false)
	wait := sendTxn(t, p, "t", 3, 2, "kept")
	for _, r := range []*Record{nil, {Topic: ""}, (&Record{Topic: "t"}).ToPartition(-1), {Topic: "t", Timestamp: time.UnixMilli(-5)}} {
		if err := p.SendSync(context.Background(), r); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("Send(%+v): %v, want ErrInvalidRecord", r, err)
		}
	}
	if err := p.CommitTransaction(ctxT(t, 30*time.Second)); err != nil {
		t.Fatalf("CommitTransaction after invalid records: %v", err)
	}
	if errs := wait(); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	checkTxnVisibility(t, c.ListenAddrs(), "t", []string{"kept"}, 6)
	if err := p.Close(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := p.SendSync(context.Background(), &Record{Topic: "t"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Close: %v, want ErrClosed", err)
	}
}

// A Send that waited for metadata while its transaction was committed,
// and then failed, never joined that transaction: it must not make the
// next one abortable.
func TestTxnLateSendFailureSparesNextTransaction(t *testing.T) {
	c := newFake(t, 3)
	p := beginTxn(t, c, testConfig(c), "late-send", false)
	asked := metadataAsked(c, "no-such-topic")
	failed := make(chan error, 1)
	sendCtx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond) // bounds its wait for metadata
	defer cancel()
	go p.Send(sendCtx, &Record{Topic: "no-such-topic", Value: []byte("x")}, func(_ *Record, err error) { failed <- err })
	<-asked // the Send waits for the topic's metadata, in this transaction
	ctx := ctxT(t, 30*time.Second)
	if err := p.CommitTransaction(ctx); err != nil { // while that Send waits for metadata
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	wait := sendTxn(t, p, "t", 3, 2, "next")
	if err := <-failed; err == nil {
		t.Fatal("the Send to a missing topic succeeded")
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("the next transaction, after a Send of the one before failed late: %v", err)
	}
	if errs := wait(); len(errs) > 0 {
		t.Fatal(errs[0])
	}
}

// An abort fails the transaction's unsent batches, but a partition's
// callbacks keep their order: a batch written but answered with an error
// and being retried, then a later batch acknowledged (its callbacks wait
// for the first), then an unsent one: first, second, third.
func TestTxnAbortKeepsCallbackOrder(t *testing.T) {
	c := newFake(t, 1)
	stop := stopAtCleanup(t)
	cfg := testConfig(c)
	oneRecordBatches(t, &cfg)
	p := beginTxn(t, c, cfg, "abort-order", false)
	ctx := ctxT(t, 30*time.Second)
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("warm")}); err != nil {
		t.Fatal(err) // the partition's first acknowledgement: it may pipeline now
	}
	retrying := writtenThenRefused(c, func() { // answered late
		c.SleepControl(func() { sleepOrStop(time.Second, stop) })
	})
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	send := func(v string) {
		wg.Add(1)
		p.Send(ctx, &Record{Topic: "t", Value: []byte(v)}, func(*Record, error) {
			mu.Lock()
			order = append(order, v)
			mu.Unlock()
			wg.Done()
		})
	}
	send("first")
	send("second")
	<-retrying
	time.Sleep(50 * time.Millisecond) // the second's acknowledgement is handled
	send("third")                     // not sent while the first is retried
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !slices.Equal(order, []string{"first", "second", "third"}) {
		t.Fatalf("callbacks in the order %v, want first, second, third", order)
	}
}

// v1: an AddPartitionsToTxn whose answer the producer gave up on
// (request.timeout.ms) as AbortTransaction began may start the transaction
// at the coordinator, even after the abort: the abort bumps the epoch,
// which fences the late add, so that no transaction stays open there to
// time out under the next one.
func TestTxnAbortAfterUnansweredAddPartitions(t *testing.T) {
	c := newFake(t, 3)
	cfg := testConfig(c)
	cfg.RequestTimeout = time.Second
	p := beginTxn(t, c, cfg, "unanswered-add", true)
	open, held := holdCounted(t, c, kmsg.AddPartitionsToTxn)
	wait := sendTxn(t, p, "t", 1, 1, "x")
	for deadline := time.Now().Add(10 * time.Second); held.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no AddPartitionsToTxn was sent")
		}
	}
	done := make(chan error, 1)
	go func() { done <- p.AbortTransaction(ctxT(t, 30*time.Second)) }()
	time.Sleep(1500 * time.Millisecond) // past request.timeout.ms: the producer gave up on the add
	open()                              // and the coordinator takes it: the transaction has begun there
	if err := <-done; err != nil {
		t.Fatalf("AbortTransaction: %v", err)
	}
	for _, err := range wait() {
		if !errors.Is(err, ErrTransactionAborted) {
			t.Errorf("the record of the aborted transaction: %v, want ErrTransactionAborted", err)
		}
	}
	if st := describeTxnState(t, c.ListenAddrs(), "unanswered-add"); st == "Ongoing" {
		t.Errorf("after AbortTransaction the coordinator's transaction is %s", st)
	}
	// The next transaction is a transaction of its own.
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	sendCommit(t, ctxT(t, 30*time.Second), p, "t", 1, 3, "next")
}

// v1: SendOffsetsToTransaction cut short while its AddOffsetsToTxn was at
// the coordinator: the abort (an epoch bump) leaves no transaction open
// there. And when such a request never reached the coordinator (an error
// answered it), the abort succeeds too.
func TestTxnAbortAfterCutShortAddOffsets(t *testing.T) {
	offs := map[string]map[int32]Offset{"t": {0: NewOffset(1)}}
	t.Run("reached the coordinator", func(t *testing.T) {
		c := newFake(t, 3)
		p := beginTxn(t, c, testConfig(c), "cut-add-offsets", true)
		open, held := holdCounted(t, c, kmsg.AddOffsetsToTxn)
		short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if err := p.SendOffsetsToTransaction(short, offs, NewGroupMetadata("g")); !errors.Is(err, ErrTransactionAbortable) || held.Load() == 0 {
			t.Fatalf("SendOffsetsToTransaction cut short: %v (AddOffsetsToTxn held: %d), want ErrTransactionAbortable", err, held.Load())
		}
		open()
		if err := p.AbortTransaction(ctxT(t, 30*time.Second)); err != nil {
			t.Fatalf("AbortTransaction: %v", err)
		}
		if st := describeTxnState(t, c.ListenAddrs(), "cut-add-offsets"); st == "Ongoing" {
			t.Errorf("after AbortTransaction the coordinator's transaction is %s", st)
		}
	})
	t.Run("never reached it", func(t *testing.T) {
		c := newFake(t, 3)
		p := beginTxn(t, c, testConfig(c), "refused-add-offsets", true)
		c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.AddOffsetsToTxn}, Err: fkerr.CoordinatorLoadInProgress, Count: -1})
		short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if err := p.SendOffsetsToTransaction(short, offs, NewGroupMetadata("g")); !errors.Is(err, ErrTransactionAbortable) {
			t.Fatalf("SendOffsetsToTransaction cut short: %v, want ErrTransactionAbortable", err)
		}
		if err := p.AbortTransaction(ctxT(t, 30*time.Second)); err != nil {
			t.Fatalf("AbortTransaction with no transaction at the coordinator: %v", err)
		}
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	})
}

// A commit cut short while its EndTxn was at the coordinator, which
// committed, then retried after a newer producer with the same
// transactional.id fenced this one: the retry takes the first EndTxn's
// answer as its own, as Java's retried commit awaits the same result, and
// reports the commit that happened, not ErrProducerFenced ("did not
// commit").
func TestTxnRetriedCommitTakesTheFirstAnswer(t *testing.T) {
	c := newFake(t, 3)
	cfg := testConfig(c)
	cfg.RequestTimeout = 20 * time.Second
	p1 := beginTxn(t, c, cfg, "retried-commit", true)
	open := holdRequests(t, c, kmsg.EndTxn)
	wait := sendTxn(t, p1, "t", 3, 5, "x")
	short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := p1.CommitTransaction(short); !errors.Is(err, ErrTransactionTimeout) {
		t.Fatalf("commit cut short: %v, want ErrTransactionTimeout", err)
	}
	open() // the coordinator commits; the answer reaches no caller yet
	if errs := wait(); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	p1.txn.mu.Lock()
	pid, epoch := p1.txn.pid, p1.txn.epoch
	p1.txn.mu.Unlock()
	p2 := newTxnProducer(t, cfg, "retried-commit", true)
	if err := p2.InitTransactions(ctxT(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	// The fenced epoch, as Kafka answers it (kfake takes any older one).
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: fkerr.ProducerFenced, Count: -1, TopLevel: true,
		When: func(r kmsg.Request) bool {
			ir := r.(*kmsg.InitProducerIDRequest)
			return ir.ProducerID == pid && ir.ProducerEpoch == epoch
		}})
	if err := p1.CommitTransaction(ctxT(t, 30*time.Second)); err != nil {
		t.Errorf("the retried commit of a transaction that committed: %v", err)
	}
	checkTxnVisibility(t, c.ListenAddrs(), "t", []string{"x"}, 15)
}

// A record refused for itself (ErrInvalidRecord, ErrSerialization) keeps
// the transaction committable when its caller hears of it, as Java's send
// throws; with no callback nobody would, and the commit would go through
// without the record: the transaction is made abortable instead.
func TestTxnSilentInvalidRecordMakesAbortable(t *testing.T) {
	c := newFake(t, 3)
	for _, tc := range []struct {
		name string
		send func(p *Producer)
	}{
		{"invalid record", func(p *Producer) { p.Send(context.Background(), (&Record{Topic: "t"}).ToPartition(-1), nil) }},
		{"serialization", func(p *Producer) {
			tp := NewTypedProducer(p, BytesSerializer{}, JSONSerializer[float64]{})
			tp.Send(context.Background(), &TypedRecord[[]byte, float64]{Topic: "t", Value: math.NaN()}, nil)
		}},
		{"nil record", func(p *Producer) { p.Send(context.Background(), nil, nil) }},
		{"nil typed record", func(p *Producer) {
			NewTypedProducer(p, BytesSerializer{}, BytesSerializer{}).Send(context.Background(), nil, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := beginTxn(t, c, testConfig(c), "silent-"+strings.ReplaceAll(tc.name, " ", "-"), false)
			wait := sendTxn(t, p, "t", 1, 2, "kept")
			tc.send(p)
			if err := p.CommitTransaction(ctxT(t, 30*time.Second)); !errors.Is(err, ErrTransactionAbortable) {
				t.Fatalf("CommitTransaction after a record failed with no callback: %v, want ErrTransactionAbortable", err)
			}
			if err := p.AbortTransaction(ctxT(t, 30*time.Second)); err != nil {
				t.Fatal(err)
			}
			wait()
		})
	}
}

// A record refused for itself (no topic, a serializer error) with no
// callback makes the open transaction abortable, but not one being
// committed: a valid record sent then would not have joined it either
// (it is refused with ErrTransactionState), so neither does this one.
func TestRefusedRecordDuringCommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(p *Producer)
	}{
		{"valid record", func(p *Producer) {
			p.Send(context.Background(), &Record{Topic: "t", Value: []byte("late")}, nil)
		}},
		{"serializer error", func(p *Producer) {
			tp := NewTypedProducer[[]byte, float64](p, BytesSerializer{}, JSONSerializer[float64]{})
			tp.Send(context.Background(), &TypedRecord[[]byte, float64]{Topic: "t", Value: math.NaN()}, nil)
		}},
		{"no topic", func(p *Producer) {
			p.Send(context.Background(), &Record{Value: []byte("x")}, nil)
		}},
		{"nil record", func(p *Producer) {
			p.Send(context.Background(), nil, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFake(t, 1)
			open := holdRequests(t, c, kmsg.Produce)
			p := newTxnProducer(t, testConfig(c), "refused-"+strings.ReplaceAll(tc.name, " ", "-"), false)
			ctx := ctxT(t, 20*time.Second)
			if err := p.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			o := newOutcomes(t)
			p.Send(ctx, &Record{Topic: "t", Value: []byte("in txn")}, o.cb())
			done := make(chan error, 1)
			go func() { done <- p.CommitTransaction(ctx) }()
			waitTxnState(t, p, txnCommitting) // its flush waits for the held Produce
			tc.send(p)
			open()
			if err := <-done; err != nil {
				t.Fatalf("CommitTransaction: %v", err)
			}
			o.wait(t, 10*time.Second)
		})
	}
}

// Once CommitTransaction sent EndTxn, a record refused with no callback
// does not make the transaction abortable: the call again learns the
// commit, which read_committed consumers see.
func TestRefusedRecordAfterEndTxnSent(t *testing.T) {
	c := newFake(t, 1)
	p := beginTxn(t, c, testConfig(c), "refused-after-endtxn", false)
	ctx := ctxT(t, 20*time.Second)
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("in txn")}); err != nil {
		t.Fatal(err)
	}
	open := commitCutShortAfterEndTxn(t, c, p, ctx)
	tp := NewTypedProducer[[]byte, float64](p, BytesSerializer{}, JSONSerializer[float64]{})
	tp.Send(context.Background(), &TypedRecord[[]byte, float64]{Topic: "t", Value: math.NaN()}, nil)
	p.Send(context.Background(), &Record{Value: []byte("no topic")}, nil)
	open()
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("CommitTransaction again, after EndTxn(commit) was sent: %v", err)
	}
	seen := readTopic(t, c.ListenAddrs(), "t", true, time.Second, func(m map[string]int) bool { return m["in txn"] > 0 })
	if seen["in txn"] != 1 {
		t.Fatalf("read_committed sees %v, want the committed record once", seen)
	}
}

// commitCutShortAfterEndTxn has p's CommitTransaction give up (its ctx
// ends after 300 ms) once it sent EndTxn(commit), which c holds until
// open is called.
func commitCutShortAfterEndTxn(t *testing.T, c *kfake.Cluster, p *Producer, ctx context.Context) (open func()) {
	t.Helper()
	open = holdRequests(t, c, kmsg.EndTxn)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := p.CommitTransaction(short); !errors.Is(err, ErrTransactionTimeout) {
		t.Fatalf("CommitTransaction with EndTxn held: %v, want ErrTransactionTimeout", err)
	}
	return open
}

// waitTxnState waits until p's transaction is in state.
func waitTxnState(t *testing.T, p *Producer, state txnState) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("transaction state %s", state), func() bool {
		p.txn.mu.Lock()
		defer p.txn.mu.Unlock()
		return p.txn.state == state
	})
}

// A record that joined the transaction (it passed the state check) but
// failed afterwards, waiting for its topic's metadata, once the commit's
// EndTxn(commit) was out, does not make the transaction abortable: the
// coordinator decides the outcome, and the commit called again learns it.
func TestSendFailedAfterEndTxnSentLeavesCommit(t *testing.T) {
	c := newFake(t, 1)
	var asked atomic.Bool
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Observe: true, Count: -1, When: func(r kmsg.Request) bool {
		for _, mt := range r.(*kmsg.MetadataRequest).Topics {
			if mt.Topic != nil && *mt.Topic == "missing" {
				asked.Store(true)
			}
		}
		return true
	}})
	cfg := testConfig(c)
	cfg.MaxBlock = time.Second
	p := beginTxn(t, c, cfg, "failed-after-endtxn", false)
	ctx := ctxT(t, 20*time.Second)
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("in txn")}); err != nil {
		t.Fatal(err)
	}
	missing := make(chan error, 1)
	go func() { missing <- p.SendSync(ctx, &Record{Topic: "missing", Value: []byte("x")}) }()
	waitUntil(t, "the Send to a missing topic to ask for its metadata", asked.Load)
	open := commitCutShortAfterEndTxn(t, c, p, ctx)
	if err := <-missing; !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("the Send to a missing topic: %v, want ErrUnknownTopic", err)
	}
	open()
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("CommitTransaction again, after EndTxn(commit) was sent: %v", err)
	}
}
