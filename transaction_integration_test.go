package kprod

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/testcluster"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactions against the real 3-broker cluster (Kafka 4.x, whose
// transaction.version is 2: v2 is what InitTransactions picks; the v1
// subtests force the AddPartitionsToTxn protocol, which the cluster still
// serves to older clients). Visibility is checked with franz-go reading
// read_committed.

func txnConfig(brokers []string) Config {
	cfg := DefaultConfig()
	cfg.BootstrapServers = brokers
	cfg.Linger = 5 * time.Millisecond
	return cfg
}

func uniqueTxnID(t *testing.T) string {
	return "txn-" + testcluster.UniqueTopic(t)
}

// txnCoordinator asks the cluster which node coordinates a transactional id.
func txnCoordinator(t *testing.T, brokers []string, id string) int32 {
	t.Helper()
	cl := testcluster.Client(t, brokers)
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = 1
	req.CoordinatorKey, req.CoordinatorKeys = id, []string{id}
	resp, err := req.RequestWith(ctxT(t, 15*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Coordinators) != 1 || resp.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("FindCoordinator %q: %+v", id, resp)
	}
	return resp.Coordinators[0].NodeID
}

// txnState asks the coordinator for a transactional id's state
// (DescribeTransactions): Ongoing, CompleteAbort, ...
func describeTxnState(t *testing.T, brokers []string, id string) string {
	t.Helper()
	node := txnCoordinator(t, brokers, id)
	cl := testcluster.Client(t, brokers)
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp, err := req.RequestWith(ctxT(t, 15*time.Second), cl.Broker(int(node)))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.TransactionStates) != 1 {
		t.Fatalf("DescribeTransactions %q: %+v", id, resp)
	}
	st := resp.TransactionStates[0]
	if err := fkerr.ErrorForCode(st.ErrorCode); err != nil {
		return err.Error()
	}
	return st.State
}

func TestIntegrationTxnCommitAbort(t *testing.T) {
	brokers := testcluster.Brokers(t)
	for _, proto := range txnProtocols {
		t.Run(proto.name, func(t *testing.T) {
			topic := testcluster.UniqueTopic(t)
			testcluster.CreateTopic(t, brokers, topic, 6, 3, nil)
			p := newTxnProducer(t, txnConfig(brokers), uniqueTxnID(t), proto.v1)
			ctx := ctxT(t, 60*time.Second)
			if err := p.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			if got := p.txn.v2; got == proto.v1 {
				t.Fatalf("transactions v2 = %v, want %v (the cluster enables transaction.version 2)", got, !proto.v1)
			}
			var committed []string
			for i := range 6 {
				prefix := fmt.Sprintf("txn%d", i)
				if err := p.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				wait := sendTxn(t, p, topic, 6, 200, prefix)
				if i%2 == 0 {
					if err := p.CommitTransaction(ctx); err != nil {
						t.Fatalf("commit %d: %v", i, err)
					}
					if errs := wait(); len(errs) > 0 {
						t.Fatalf("commit %d: %d records failed: %v", i, len(errs), errs[0])
					}
					committed = append(committed, prefix)
					continue
				}
				if i == 3 {
					// Abort after the records are written: the abort
					// markers must hide them.
					if err := p.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if err := p.AbortTransaction(ctx); err != nil {
					t.Fatalf("abort %d: %v", i, err)
				}
				for _, err := range wait() {
					if !errors.Is(err, ErrTransactionAborted) {
						t.Fatalf("a record of aborted transaction %d failed with %v", i, err)
					}
				}
			}
			checkTxnVisibility(t, brokers, topic, committed, 6*200)
			// read_uncommitted shows what was written and then aborted.
			all := readTopic(t, brokers, topic, false, time.Second, func(m map[string]int) bool { return len(m) >= 4*6*200 })
			n := 0
			for v := range all {
				if strings.HasPrefix(v, "txn3:") {
					n++
				}
			}
			if n != 6*200 {
				t.Errorf("read_uncommitted sees %d records of the aborted transaction 3, want %d", n, 6*200)
			}
		})
	}
}

// TestIntegrationTxnFenced: a second producer with the same
// transactional.id fences the first: the first's open transaction is
// aborted by the coordinator, its commit fails with ErrProducerFenced, and
// nothing of it becomes visible.
func TestIntegrationTxnFenced(t *testing.T) {
	brokers := testcluster.Brokers(t)
	for _, proto := range txnProtocols {
		t.Run(proto.name, func(t *testing.T) {
			topic := testcluster.UniqueTopic(t)
			testcluster.CreateTopic(t, brokers, topic, 6, 3, nil)
			id := uniqueTxnID(t)
			ctx := ctxT(t, 60*time.Second)
			p1 := newTxnProducer(t, txnConfig(brokers), id, proto.v1)
			if err := p1.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p1.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			wait := sendTxn(t, p1, topic, 6, 100, "zombie")
			if err := p1.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if errs := wait(); len(errs) > 0 {
				t.Fatal(errs[0])
			}

			p2 := newTxnProducer(t, txnConfig(brokers), id, proto.v1)
			if err := p2.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			err := p1.CommitTransaction(ctx)
			if !errors.Is(err, ErrProducerFenced) || !errors.Is(err, ErrFatal) {
				t.Fatalf("fenced producer's commit: %v, want ErrProducerFenced", err)
			}
			t.Logf("fenced producer's commit: %v", err)
			if errs := sendTxn(t, p1, topic, 1, 1, "zombie2")(); len(errs) != 1 || !errors.Is(errs[0], ErrProducerFenced) {
				t.Fatalf("fenced producer's Send: %v", errs)
			}
			if err := p1.BeginTransaction(); !errors.Is(err, ErrProducerFenced) {
				t.Fatalf("fenced producer's BeginTransaction: %v", err)
			}

			if err := p2.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			wait = sendTxn(t, p2, topic, 6, 100, "new")
			if err := p2.CommitTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			if errs := wait(); len(errs) > 0 {
				t.Fatal(errs[0])
			}
			checkTxnVisibility(t, brokers, topic, []string{"new"}, 600)
		})
	}
}

// TestIntegrationTxnCoordinatorKilled: the transaction coordinator is
// killed (SIGKILL) mid-transaction, before the commit or while it runs.
// The transaction ends wholly committed or wholly aborted, and the
// producer's answer matches what read_committed consumers see.
func TestIntegrationTxnCoordinatorKilled(t *testing.T) {
	brokers := testcluster.Brokers(t)
	for _, proto := range txnProtocols {
		for _, when := range []string{"before-commit", "during-commit"} {
			t.Run(proto.name+"/"+when, func(t *testing.T) {
				topic := testcluster.UniqueTopic(t)
				testcluster.CreateTopic(t, brokers, topic, 6, 3, nil)
				id := uniqueTxnID(t)
				cfg := txnConfig(brokers)
				cfg.RequestTimeout = 10 * time.Second
				p := newTxnProducer(t, cfg, id, proto.v1)
				ctx := ctxT(t, 150*time.Second)
				if err := p.InitTransactions(ctx); err != nil {
					t.Fatal(err)
				}
				// A committed transaction first, so that the killed
				// coordinator has history to recover.
				if err := p.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				first := sendTxn(t, p, topic, 6, 200, "first")
				if err := p.CommitTransaction(ctx); err != nil {
					t.Fatal(err)
				}
				if errs := first(); len(errs) > 0 {
					t.Fatalf("the first transaction committed, but %d of its records failed: %v", len(errs), errs[0])
				}

				if err := p.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				wait := sendTxn(t, p, topic, 6, 200, "killed")
				if err := p.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				node := txnCoordinator(t, brokers, id)
				start := time.Now()
				var err error
				if when == "before-commit" {
					testcluster.Kill(t, int(node))
					err = p.CommitTransaction(ctx)
				} else {
					done := make(chan error, 1)
					go func() { done <- p.CommitTransaction(ctx) }()
					testcluster.Kill(t, int(node))
					err = <-done
				}
				// If the outcome was not learnt, asking again (the commit
				// is retried where it stopped) must learn it.
				for tries := 0; err != nil && !errors.Is(err, ErrFatal) && !errors.Is(err, ErrTransactionAbortable) && tries < 3; tries++ {
					t.Logf("commit: %v; asking again", err)
					err = p.CommitTransaction(ctx)
				}
				t.Logf("coordinator %d killed %s: commit returned %v after %v", node, when, err, time.Since(start).Round(time.Millisecond))
				// A lost coordinator is a retriable condition: the producer
				// finds the new one and learns the outcome. Anything but a
				// commit or an abortable error is a producer that gave up.
				if err != nil && (!errors.Is(err, ErrTransactionAbortable) || errors.Is(err, ErrFatal)) {
					t.Fatalf("commit with the coordinator killed %s: %v, want success or ErrTransactionAbortable", when, err)
				}
				recErrs := wait()
				committed := []string{"first"}
				if err == nil {
					committed = append(committed, "killed")
					if len(recErrs) > 0 {
						t.Fatalf("commit succeeded but %d records failed: %v", len(recErrs), recErrs[0])
					}
				} else if errors.Is(err, ErrTransactionAbortable) {
					if err := p.AbortTransaction(ctx); err != nil {
						t.Fatalf("abort: %v", err)
					}
				}
				checkTxnVisibility(t, brokers, topic, committed, 6*200)
			})
		}
	}
}

// TestIntegrationTxnTimeout: a transaction left open longer than
// transaction.timeout.ms is aborted by its coordinator, and the producer
// says so on commit with a typed error; nothing of it becomes visible.
func TestIntegrationTxnTimeout(t *testing.T) {
	brokers := testcluster.Brokers(t)
	for _, proto := range txnProtocols {
		for _, sendLate := range []bool{false, true} {
			name := proto.name + "/commit-after-timeout"
			if sendLate {
				name = proto.name + "/send-after-timeout"
			}
			t.Run(name, func(t *testing.T) {
				topic := testcluster.UniqueTopic(t)
				testcluster.CreateTopic(t, brokers, topic, 6, 3, nil)
				id := uniqueTxnID(t)
				cfg := txnConfig(brokers)
				// The brokers look for timed-out transactions every
				// transaction.abort.timed.out.transaction.cleanup.interval.ms
				// (10 s by default, 1 s in scripts/kafka-cluster.sh); the
				// timeout has no lower bound but 1 ms.
				cfg.TransactionTimeout = 3 * time.Second
				p := newTxnProducer(t, cfg, id, proto.v1)
				ctx := ctxT(t, 90*time.Second)
				if err := p.InitTransactions(ctx); err != nil {
					t.Fatal(err)
				}
				if err := p.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				wait := sendTxn(t, p, topic, 6, 50, "late")
				if err := p.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				if errs := wait(); len(errs) > 0 {
					t.Fatal(errs[0])
				}
				deadline := time.Now().Add(40 * time.Second)
				state := ""
				for time.Now().Before(deadline) {
					if state = describeTxnState(t, brokers, id); state != "Ongoing" && state != "PrepareEpochFence" && state != "PrepareAbort" {
						break
					}
					time.Sleep(500 * time.Millisecond)
				}
				t.Logf("coordinator state after the timeout: %s", state)
				var recErrs []error
				if sendLate {
					// The coordinator aborted the transaction and bumped
					// the epoch: records sent now cannot join it.
					recErrs = sendTxn(t, p, topic, 6, 5, "late2")()
					if len(recErrs) != 6*5 {
						t.Fatalf("%d of %d records sent after the transaction timed out failed, want all", len(recErrs), 6*5)
					}
					t.Logf("a record sent after the timeout: %v", recErrs[0])
				}
				// The coordinator's abort bumped the epoch, which is all a
				// partition leader or the coordinator can tell: the
				// producer asks the coordinator (InitProducerId with its
				// epoch, KIP-588) and learns that no other producer took
				// over, so the error is abortable, not fatal.
				err := p.CommitTransaction(ctx)
				t.Logf("commit after the timeout: %v", err)
				if !errors.Is(err, ErrTransactionAbortable) || errors.Is(err, ErrFatal) {
					t.Fatalf("commit of a timed-out transaction: %v, want ErrTransactionAbortable", err)
				}
				if !strings.Contains(err.Error(), "transaction.timeout.ms") {
					t.Errorf("the commit's error does not name transaction.timeout.ms: %v", err)
				}
				if err := p.AbortTransaction(ctx); err != nil {
					t.Fatalf("abort after the timeout: %v", err)
				}
				checkTxnVisibility(t, brokers, topic, nil, 0)

				// The producer goes on.
				if err := p.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				wait = sendTxn(t, p, topic, 6, 10, "after")
				if err := p.CommitTransaction(ctx); err != nil {
					t.Fatal(err)
				}
				if errs := wait(); len(errs) > 0 {
					t.Fatal(errs[0])
				}
				checkTxnVisibility(t, brokers, topic, []string{"after"}, 60)
			})
		}
	}
}
