package kprod

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AbortTransaction does not wait for a Send of the transaction that waits
// for buffer memory (in an outage only the abort frees it): that Send
// stops waiting and its record fails with ErrTransactionAborted.
func TestTxnAbortNotBlockedBySendWaitingForMemory(t *testing.T) {
	p, ctx, open, sendErr := txnSendWaitingForMemory(t, "abort-memory", 10*time.Second)
	actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := p.AbortTransaction(actx); !errors.Is(err, context.DeadlineExceeded) {
		// A batch in flight is held: the abort waits for it until its ctx ends.
		t.Errorf("AbortTransaction with a batch held in flight: %v, want its ctx's deadline", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("AbortTransaction with a 300ms ctx took %v: it waited for the Send waiting for memory", el)
	}
	if err := <-sendErr; !errors.Is(err, ErrTransactionAborted) {
		t.Errorf("the Send waiting for memory: %v, want ErrTransactionAborted", err)
	}
	open()
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("AbortTransaction again: %v", err)
	}
}

// A Send from a callback while a commit or abort holds or waits for
// appendMu fails at once instead of waiting: the commit may wait for a
// Send that waits for memory, which only the callbacks' goroutine frees
// (the test holds appendMu itself, as such a commit would wait for it).
func TestTxnSendFromCallbackDuringCommitDoesNotWait(t *testing.T) {
	c := newFake(t, 2)
	p := beginTxn(t, c, testConfig(c), "callback-during-commit", false)
	open, held := holdCounted(t, c, kmsg.Produce)
	ctx := ctxT(t, 30*time.Second)
	got := make(chan error, 1)
	p.Send(ctx, &Record{Topic: "t", Value: []byte("a")}, func(_ *Record, err error) {
		if err != nil {
			t.Errorf("first record: %v", err)
		}
		p.Send(ctx, &Record{Topic: "t", Value: []byte("b")}, func(_ *Record, err error) { got <- err })
	})
	for deadline := time.Now().Add(10 * time.Second); held.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first record was not sent")
		}
	}
	_ = p.txn.appendMu.Lock(context.Background())
	open()
	select {
	case err := <-got:
		p.txn.appendMu.Unlock()
		if !errors.Is(err, ErrTransactionState) || !strings.Contains(err.Error(), "from a callback") {
			t.Fatalf("Send from a callback while the transaction ends: %v, want ErrTransactionState saying why", err)
		}
	case <-time.After(10 * time.Second):
		p.txn.appendMu.Unlock()
		t.Fatal("a Send from a callback waited for a commit or abort to end the transaction")
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("CommitTransaction: %v", err)
	}
}

// Close lets a CommitTransaction under way finish (as Java's close lets
// pending transactional requests complete) instead of aborting its
// transaction under it.
func TestTxnCloseLetsCommitFinish(t *testing.T) {
	c := newFake(t, 3)
	var mu sync.Mutex
	var ends []bool
	release, open := gate(t)
	got := make(chan struct{}, 1)
	c.ControlKey(int16(kmsg.EndTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		ends = append(ends, r.(*kmsg.EndTxnRequest).Commit)
		mu.Unlock()
		select {
		case got <- struct{}{}:
		default:
		}
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
	p := beginTxn(t, c, testConfig(c), "close-commit", false)
	wait := sendTxn(t, p, "t", 3, 5, "committed")
	ctx := ctxT(t, 30*time.Second)
	commitErr := make(chan error, 1)
	go func() { commitErr <- p.CommitTransaction(ctx) }()
	<-got // EndTxn(commit) sent and held
	closeErr := make(chan error, 1)
	go func() { closeErr <- p.Close(ctx) }()
	for deadline := time.Now().Add(5 * time.Second); !p.closed.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Close did not start")
		}
	}
	time.Sleep(50 * time.Millisecond) // and reached its wait for the commit
	open()
	if err := <-commitErr; err != nil {
		t.Fatalf("CommitTransaction with Close under way: %v", err)
	}
	if err := <-closeErr; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if errs := wait(); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ends) != 1 || !ends[0] {
		t.Errorf("EndTxn requests (commit?) %v, want the one commit", ends)
	}
}

// An abortable error from InitProducerId leaves the producer initializing:
// the error says to call InitTransactions again, not to abort (there is no
// transaction yet), and calling it again works.
func TestTxnInitAbortableSaysInitAgain(t *testing.T) {
	c := newFake(t, 1)
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: fkerr.TransactionAbortable, Count: 1})
	cfg := testConfig(c)
	p := newTxnProducer(t, cfg, "init-abortable", false)
	ctx := ctxT(t, 30*time.Second)
	err := p.InitTransactions(ctx)
	if err == nil {
		t.Fatal("InitTransactions succeeded despite TRANSACTION_ABORTABLE")
	}
	if errors.Is(err, ErrTransactionAbortable) || !strings.Contains(err.Error(), "call InitTransactions again") {
		t.Errorf("InitTransactions: %v; want no ErrTransactionAbortable, and to be told to call it again", err)
	}
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatalf("InitTransactions again: %v", err)
	}
}

// ErrTransactionTimeout means "cut short by the ctx or max.block.ms, call
// again": not for a producer that was closed, nor for an error that ended
// the retries by itself (a loop on it would spin).
func TestCutShortTimeoutOnlyWhenCtxEnded(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(live)
	cancel()
	boom := errors.New("boom")
	for _, tc := range []struct {
		ctx     context.Context
		err     error
		timeout bool
	}{
		{ended, boom, true},
		{live, boom, false},
		{ended, fmt.Errorf("x: %w", ErrClosed), false},
		{live, fmt.Errorf("x: %w", ErrClosed), false},
	} {
		err := cutShort(tc.ctx, "CommitTransaction", tc.err)
		if errors.Is(err, ErrTransactionTimeout) != tc.timeout || !errors.Is(err, tc.err) {
			t.Errorf("cutShort(ctx ended %v, %v) = %v; want ErrTransactionTimeout %v, wrapping the error", tc.ctx.Err() != nil, tc.err, err, tc.timeout)
		}
	}
}

// A Send that an abort stopped (ErrTransactionAborted) reports its failure
// after the abort released appendMu, possibly once the next transaction
// began: that failure must not make the next transaction abortable.
func TestAbortedSendDoesNotFailNextTransaction(t *testing.T) {
	c := newFake(t, 1)
	p := beginTxn(t, c, testConfig(c), "late-failure", false)
	p.txn.sendFailed(&Record{Topic: "t"}, 0, fmt.Errorf("stopped: %w", ErrTransactionAborted), true)
	if err := p.CommitTransaction(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("CommitTransaction after a late failure of an aborted Send: %v", err)
	}
}

// A TxnOffsetCommit that SendOffsetsToTransaction gave up on (its ctx
// ended) is still on the wire to the group coordinator: the abort's
// EndTxn, sent to another broker, must wait for its answer rather than
// overtake it, as Java's one-request-at-a-time sender does.
func TestTxnAbortWaitsForOffsetsCutShort(t *testing.T) {
	for _, proto := range txnProtocols {
		t.Run(proto.name, func(t *testing.T) {
			c := newFake(t, 3)
			p := beginTxn(t, c, testConfig(c), "late-offsets", proto.v1)
			ctx := ctxT(t, 30*time.Second)
			// A group whose coordinator is not the transaction's, so that
			// the two requests travel on different connections.
			group := ""
			for i := range 50 {
				g := fmt.Sprintf("g%d", i)
				if err := p.txn.acquire(ctx); err != nil {
					t.Fatal(err)
				}
				br, _, err := p.txn.coordinator(ctx, coordGroup, g)
				p.txn.release()
				if err != nil {
					t.Fatal(err)
				}
				p.txn.mu.Lock()
				txnCoord := p.txn.coord
				p.txn.mu.Unlock()
				if br.ID() != txnCoord {
					group = g
					break
				}
			}
			if group == "" {
				t.Fatal("no group with a coordinator other than the transaction's among 50")
			}

			release, stop := make(chan struct{}), stopAtCleanup(t)
			var answered, endTxnEarly atomic.Bool
			c.ControlKey(int16(kmsg.TxnOffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				c.SleepControl(func() {
					select {
					case <-release:
					case <-stop: // the test failed before releasing it
					}
				})
				answered.Store(true)
				return nil, nil, false
			})
			c.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if !answered.Load() {
					endTxnEarly.Store(true)
				}
				return nil, nil, false
			})

			offs := map[string]map[int32]Offset{"t": {0: {Offset: 3, LeaderEpoch: -1}}}
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			err := p.SendOffsetsToTransaction(short, offs, NewGroupMetadata(group))
			cancel()
			if !errors.Is(err, ErrTransactionAbortable) {
				t.Fatalf("SendOffsetsToTransaction cut short: %v; want ErrTransactionAbortable", err)
			}
			aborted := make(chan error, 1)
			go func() { aborted <- p.AbortTransaction(ctx) }()
			select {
			case err := <-aborted:
				t.Fatalf("AbortTransaction returned (%v) while the TxnOffsetCommit it must not overtake was unanswered", err)
			case <-time.After(300 * time.Millisecond):
			}
			close(release)
			if err := <-aborted; err != nil {
				t.Fatalf("AbortTransaction: %v", err)
			}
			if endTxnEarly.Load() {
				t.Fatal("EndTxn reached the transaction coordinator before the TxnOffsetCommit was answered")
			}
		})
	}
}

// Two CommitTransaction (or two AbortTransaction) calls under way at once
// end the transaction once, and both return its outcome, as Java's
// callers share one pending result: the second must not end whatever
// transaction is current when it gets its turn (after the first was over,
// the next may have begun).
func TestTxnConcurrentEndsEndOnce(t *testing.T) {
	for _, commit := range []bool{true, false} {
		name := map[bool]string{true: "commit", false: "abort"}[commit]
		t.Run(name, func(t *testing.T) {
			c := newFake(t, 1)
			p := beginTxn(t, c, testConfig(c), "concurrent-"+name, false)
			if errs := sendTxn(t, p, "t", 1, 3, "x")(); len(errs) > 0 {
				t.Fatal(errs[0])
			}
			var endTxns atomic.Int32
			c.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				endTxns.Add(1)
				return nil, nil, false
			})
			ctx := ctxT(t, 30*time.Second)
			// Both calls wait for the coordinator's turn, which the test
			// holds until both are there.
			if err := p.txn.acquire(ctx); err != nil {
				t.Fatal(err)
			}
			errs := make(chan error, 2)
			for range 2 {
				go func() {
					if commit {
						errs <- p.CommitTransaction(ctx)
					} else {
						errs <- p.AbortTransaction(ctx)
					}
				}()
			}
			for p.txn.acquiring.Load() < 2 {
				if ctx.Err() != nil {
					p.txn.release()
					t.Fatal("the two calls did not get to the coordinator's turn")
				}
				time.Sleep(time.Millisecond)
			}
			p.txn.release()
			for range 2 {
				if err := <-errs; err != nil {
					t.Errorf("%s: %v, want nil (the outcome both calls asked for)", name, err)
				}
			}
			if n := endTxns.Load(); n != 1 {
				t.Errorf("%d EndTxn requests, want 1", n)
			}
			// The producer is ready for the next transaction.
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if errs := sendTxn(t, p, "t", 1, 3, "y")(); len(errs) > 0 {
				t.Fatal(errs[0])
			}
			if err := p.CommitTransaction(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Close after a CommitTransaction that its ctx cut short once EndTxn was
// sent finishes that commit, as Java's close completes a pending EndTxn:
// the commit is decided, and a transaction left open would hold
// read_committed consumers back until transaction.timeout.ms.
func TestCloseFinishesCommitCutShort(t *testing.T) {
	c := newFake(t, 3)
	p := beginTxn(t, c, testConfig(c), "close-after-cut-commit", false)
	wait := sendTxn(t, p, "t", 3, 5, "x")
	if err := p.Flush(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	loading := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: fkerr.CoordinatorLoadInProgress, Count: -1})
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := p.CommitTransaction(short); !errors.Is(err, ErrTransactionTimeout) {
		t.Fatalf("commit cut short: %v, want ErrTransactionTimeout", err)
	}
	loading.Remove()
	var ends atomic.Int32
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Observe: true, Count: -1,
		When: func(kmsg.Request) bool { ends.Add(1); return true }})
	if err := p.Close(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if errs := wait(); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	if ends.Load() == 0 {
		t.Error("Close sent no EndTxn for the commit cut short")
	}
	seen := readTopic(t, c.ListenAddrs(), "t", true, 2*time.Second, func(m map[string]int) bool { return len(m) == 15 })
	if len(seen) != 15 {
		t.Errorf("after Close, read_committed sees %d of the 15 records", len(seen))
	}
}

// CommitTransaction waits for a Send of the transaction that waits for
// buffer memory (its record belongs to the transaction), but no longer
// than its own ctx: it returns ErrTransactionTimeout with the
// transaction still open, before that Send gives up, and leaves nothing
// waiting behind it: other Sends of the open transaction, from callbacks
// too, are not held back or refused. An abort then ends both.
func TestTxnCommitCtxWhileSendWaitsForMemory(t *testing.T) {
	p, ctx, open, sendErr := txnSendWaitingForMemory(t, "commit-memory", time.Minute)
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := p.CommitTransaction(cctx); !errors.Is(err, ErrTransactionTimeout) {
		t.Fatalf("CommitTransaction while a Send waits for memory: %v, want ErrTransactionTimeout", err)
	}
	if !p.txn.appendMu.TryRLock() { // as a Send from a callback tries it
		t.Fatal("after the commit gave up, Sends of the open transaction are still held back by it")
	}
	p.txn.appendMu.RUnlock()
	select {
	case err := <-sendErr:
		t.Fatalf("the Send waiting for memory ended (%v) before the commit returned: the commit waited for it past its ctx", err)
	default:
	}
	open()
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("AbortTransaction: %v", err)
	}
	if err := <-sendErr; !errors.Is(err, ErrTransactionAborted) {
		t.Errorf("the Send waiting for memory: %v, want ErrTransactionAborted", err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkNoProducerGoroutines(t, "Close")
}

// txnSendWaitingForMemory is a transaction whose four batches fill
// buffer.memory, held in flight until open is called, and a fifth Send
// of it (its outcome on sendErr) waiting for memory, up to maxBlock.
func txnSendWaitingForMemory(t *testing.T, id string, maxBlock time.Duration) (p *Producer, ctx context.Context, open func(), sendErr chan error) {
	t.Helper()
	c := newFake(t, 4)
	cfg := testConfig(c)
	cfg.BufferMemory = 64 << 10
	cfg.BatchSize = 16 << 10
	cfg.MaxBlock = maxBlock
	p = beginTxn(t, c, cfg, id, false)
	open, held := holdCounted(t, c, kmsg.Produce)
	ctx = ctxT(t, 30*time.Second)
	for part := range int32(4) { // four batches: all of buffer.memory
		p.Send(ctx, (&Record{Topic: "t", Value: make([]byte, 15<<10)}).ToPartition(part), nil)
	}
	sendErr = make(chan error, 1)
	go func() { sendErr <- p.SendSync(ctx, (&Record{Topic: "t", Value: make([]byte, 15<<10)}).ToPartition(0)) }()
	// A batch in flight (held), so that a commit or abort has to wait for it.
	waitUntil(t, "the fifth Send to wait for memory, and a batch to be sent", func() bool {
		return p.Metrics().WaitingThreads > 0 && held.Load() > 0
	})
	return p, ctx, open, sendErr
}

// A record sent from a callback while a commit waits for a Send waiting
// for memory joins the transaction (the commit has not taken the append
// lock yet): when that commit gives up on its ctx, the transaction still
// open, the next commit includes it, as it includes a record another
// goroutine sent meanwhile. (It was refused, and with no callback lost.)
func TestTxnCallbackSendWhileCommitWaits(t *testing.T) {
	c := newFake(t, 2)
	cfg := testConfig(c)
	var mu sync.Mutex
	acks := map[string]error{}
	cfg.Interceptors = []Interceptor{InterceptorFuncs{Ack: func(r *Record, err error) {
		mu.Lock()
		acks[string(r.Value)] = err
		mu.Unlock()
	}}}
	p := beginTxn(t, c, cfg, "callback-while-commit-waits", false)
	open, held := holdCounted(t, c, kmsg.Produce)
	ctx := ctxT(t, 30*time.Second)
	cbDone := make(chan struct{})
	p.Send(ctx, &Record{Topic: "t", Value: []byte("a")}, func(_ *Record, err error) {
		if err != nil {
			t.Errorf("a: %v", err)
		}
		p.Send(ctx, &Record{Topic: "t", Value: []byte("b")}, nil) // no callback
		close(cbDone)
	})
	waitUntil(t, "a to be sent", func() bool { return held.Load() > 0 })
	p.txn.appendMu.RLock(context.Background()) // as a Send of the transaction waiting for memory holds it
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	commitErr := make(chan error, 1)
	go func() { commitErr <- p.CommitTransaction(cctx) }()
	waitUntil(t, "the commit to wait for the append lock", func() bool { return gateWaiting(&p.txn.appendMu) == 1 })
	sentC := make(chan struct{})
	go func() { p.Send(ctx, &Record{Topic: "t", Value: []byte("c")}, nil); close(sentC) }()
	open()
	<-cbDone
	if err := <-commitErr; !errors.Is(err, ErrTransactionTimeout) {
		t.Fatalf("first commit: %v, want ErrTransactionTimeout", err)
	}
	<-sentC
	p.txn.appendMu.RUnlock()
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("second commit: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range []string{"b", "c"} {
		if err, ok := acks[v]; !ok || err != nil {
			t.Errorf("%s: acknowledged %v, error %v; want it committed", v, ok, err)
		}
	}
}

// A Send of the transaction waits while a commit waits for the append
// lock, but only until its own ctx ends: it then fails with ctx's error.
// The commit had not taken the transaction yet (it may still give up,
// the transaction open), so the record failed in the transaction, which
// can no longer commit: the commit fails rather than go through without
// it. Had the commit taken the transaction first, the record would not
// have joined it and changes nothing.
func TestTxnSendWaitingForCommitEndsWithItsCtx(t *testing.T) {
	c := newFake(t, 2)
	p := beginTxn(t, c, testConfig(c), "send-waits-for-commit", false)
	ctx := ctxT(t, 30*time.Second)
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if err := p.txn.appendMu.RLock(ctx); err != nil { // as a Send of the transaction waiting for memory holds it
		t.Fatal(err)
	}
	commitErr := make(chan error, 1)
	go func() { commitErr <- p.CommitTransaction(ctx) }()
	waitUntil(t, "the commit to wait for the append lock", func() bool { return gateWaiting(&p.txn.appendMu) == 1 })

	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	var sendErr error
	p.Send(sctx, &Record{Topic: "t", Value: []byte("b")}, func(_ *Record, err error) { sendErr = err })
	if !errors.Is(sendErr, context.DeadlineExceeded) || !strings.Contains(sendErr.Error(), "can no longer be committed: abort it") {
		t.Errorf("the Send that gave up: %v, want its deadline, saying the transaction can no longer be committed", sendErr)
	}
	p.txn.appendMu.RUnlock()
	if err := <-commitErr; !errors.Is(err, ErrTransactionAbortable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the commit, after a Send of its transaction gave up waiting for it: %v, want ErrTransactionAbortable naming the Send's deadline", err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("AbortTransaction: %v", err)
	}

	// A commit that has taken the transaction came first: a Send giving
	// up behind it never joined, and leaves the commit alone; so does one
	// sent in a transaction that has ended since (another one open now).
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	gen := p.txn.gen.Load()
	for _, tc := range []struct {
		name  string
		state txnState
		gen   uint64
		want  gateWait
		says  string
	}{
		{"behind a commit that had taken the transaction", txnCommitting, gen, gateWaitTaken, "had taken the transaction"},
		{"sent in a transaction that has ended", txnInTransaction, gen - 1, gateWaitEnded, "had ended by then"},
	} {
		p.txn.mu.Lock()
		p.txn.state = tc.state // as CommitTransaction sets it under the append lock
		p.txn.mu.Unlock()
		err := p.txn.gateWaitEnded("t", tc.gen, context.DeadlineExceeded)
		p.txn.sendFailed(&Record{Topic: "t"}, tc.gen, err, true)
		p.txn.mu.Lock()
		state := p.txn.state
		p.txn.state = txnInTransaction
		p.txn.mu.Unlock()
		var werr *txnGateWaitError
		if !errors.As(err, &werr) || werr.why != tc.want || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("a Send that gave up %s: %v, want it to say it %s", tc.name, err, tc.says)
		}
		if state != tc.state {
			t.Errorf("a Send that gave up %s: the state became %s", tc.name, state)
		}
	}
}

// A Send of transaction 1 waits for a new topic's metadata while
// transaction 1 commits and transaction 2 begins; it then waits at the
// append lock behind transaction 2's commit, and its ctx ends there. Its
// record was part of neither transaction: its error says so, and
// transaction 2 commits.
func TestTxnSendFromAnEndedTransactionWaitingForCommit(t *testing.T) {
	c := newFake(t, 2)
	cfg := testConfig(c)
	cfg.AllowAutoCreateTopics = false
	p := beginTxn(t, c, cfg, "gate-wait-ended", false)
	ctx := ctxT(t, 30*time.Second)

	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	asked := metadataAsked(c, "new")
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	sendErr := make(chan error, 1)
	go p.Send(sctx, &Record{Topic: "new", Value: []byte("late")}, func(_ *Record, err error) { sendErr <- err })
	<-asked // past the state check of transaction 1, waiting for metadata
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}

	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if err := p.txn.appendMu.RLock(ctx); err != nil { // as a Send of transaction 2 waiting for memory holds it
		t.Fatal(err)
	}
	commitErr := make(chan error, 1)
	go func() { commitErr <- p.CommitTransaction(ctx) }()
	waitUntil(t, "the commit to wait for the append lock", func() bool { return gateWaiting(&p.txn.appendMu) == 1 })

	// The topic appears: the first Send goes on, to wait at the lock.
	createTopic(t, ctx, c, "new", 1)
	waitUntil(t, "the first Send to wait at the append lock", func() bool { return gateReadersWaiting(&p.txn.appendMu) == 1 })
	scancel()
	serr := <-sendErr
	var werr *txnGateWaitError
	if !errors.Is(serr, context.Canceled) || !errors.As(serr, &werr) || werr.why != gateWaitEnded || !strings.Contains(serr.Error(), "not part of any transaction") {
		t.Errorf("the Send of transaction 1 that gave up behind transaction 2's commit: %v, want ctx's error saying the record is part of no transaction", serr)
	}
	p.txn.appendMu.RUnlock()
	if err := <-commitErr; err != nil {
		t.Errorf("transaction 2's commit: %v, want nil: the Send that gave up was not part of it", err)
	}
}
