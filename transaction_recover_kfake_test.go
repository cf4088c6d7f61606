package kprod

import (
	"errors"
	"testing"
	"time"

	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A batch waiting for its retry when a coordinator-aborted transaction is
// recovered (recoverFenced, dropAll) is dropped in its own epoch, before
// the new epoch numbers the partition from 0 again. (Renumbered first and
// then dropped, it left the partition's next sequence past 0 in an epoch
// nothing was sent in, and the next transaction's first batch was refused
// until delivery.timeout.ms.)
func TestTxnRecoveredAbortRestartsSequences(t *testing.T) {
	for _, proto := range txnProtocols {
		t.Run(proto.name, func(t *testing.T) {
			c := newFake(t, 3)
			cfg := testConfig(c)
			cfg.RetryBackoff = 3 * time.Second
			cfg.RetryBackoffMax = 3 * time.Second
			cfg.DeliveryTimeout = 8 * time.Second
			cfg.RequestTimeout = 4 * time.Second
			cfg.Linger = 0
			p := beginTxn(t, c, cfg, "dropall", proto.v1)
			ctx := ctxT(t, 60*time.Second)
			// txn 1: partition 0 gets producer state.
			if errs := sendTxn(t, p, "t", 1, 1, "first")(); len(errs) > 0 {
				t.Fatal(errs)
			}
			if err := p.CommitTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			// txn 2: a batch to partition 0 fails retriably and waits for its retry.
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Partitions: []int32{0}, Err: fkerr.NotEnoughReplicas})
			wait := sendTxn(t, p, "t", 1, 1, "retry")
			waitUntil(t, "the fault to hit", func() bool { return h.Hits() > 0 })
			// The coordinator says our epoch is fenced (as after its
			// transaction.timeout.ms abort); recoverFenced recovers.
			c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: fkerr.ProducerFenced})
			err := p.SendOffsetsToTransaction(ctx, map[string]map[int32]Offset{"t": {1: {Offset: 1, LeaderEpoch: -1}}}, NewGroupMetadata("g"))
			t.Logf("SendOffsets: %v", err)
			if !errors.Is(err, ErrTransactionAbortable) {
				t.Fatalf("want abortable, got %v", err)
			}
			if errs := wait(); len(errs) != 1 || !errors.Is(errs[0], ErrTransactionAborted) {
				t.Fatalf("the record waiting for its retry: %v, want ErrTransactionAborted", errs)
			}
			if err := p.AbortTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			// txn 3 on partition 0 must commit.
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			w3 := sendTxn(t, p, "t", 1, 1, "third")
			start := time.Now()
			err = p.CommitTransaction(ctx)
			t.Logf("third commit after %v: %v; record: %v", time.Since(start).Round(time.Millisecond), err, w3())
			if err != nil {
				t.Fatalf("the next transaction failed: %v", err)
			}
		})
	}
}
