package kprod

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kprod/kprod/internal/live"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnSender is the sender's side of a transactional producer; owned by
// the sender goroutine.
//
// Each round starts with txnPrepare, which takes a snapshot of the
// transaction's state, adopts a new producer id or epoch (after
// InitTransactions, a v2 EndTxn or a v1 epoch bump; only with nothing in
// flight, as every batch of the previous transaction is then complete) and
// fails what the state says must not be sent: everything after a fatal
// error; the batches never sent while the transaction is abortable or
// being aborted (those sent once keep their sequence and are retried to
// completion, as Java's abortUndrainedBatches does, unless the
// coordinator has aborted the transaction already). With transactions v1
// a partition's batches are drained only once the partition is in the
// transaction; the sender collects the partitions that are not and hands
// them to the AddPartitionsToTxn goroutine (addLoop), which wakes it when
// they are added.
type txnSender struct {
	on         bool
	idGen      uint64   // the producer id generation adopted
	round      txnRound // this round's snapshot
	need       []*partq // v1: partitions with a batch, not in the transaction yet
	startedGen uint64   // v2: the transaction already marked started
	wg         sync.WaitGroup
}

type txnRound struct {
	state txnState
	gen   uint64
	v2    bool
	err   error
	// dropAll: the coordinator aborted the transaction: even batches
	// sent once are not sent again.
	dropAll bool
}

// txnPrepare is the transactional producer's ensureProducerID: it reports
// whether batches may be drained this round.
func (s *sender) txnPrepare() bool {
	t := s.p.txn
	t.mu.Lock()
	s.txn.round = txnRound{state: t.state, gen: t.gen.Load(), v2: t.v2, err: t.err, dropAll: t.aborted}
	idGen, pid, epoch := t.idGen, t.pid, t.epoch
	t.mu.Unlock()
	r := s.txn.round
	abort := func() {
		s.abortTxnBatches(r.gen, r.dropAll, func(b *batch) error {
			what := "were not sent"
			if b.sent {
				// Sent once, under the epoch the coordinator aborted.
				what = "were sent, and aborted with the transaction"
			}
			if r.state == txnAborting && r.err == nil {
				return fmt.Errorf("%w: %d records for %s[%d] %s before AbortTransaction", kerr.ErrTransactionAborted, len(b.recs), b.q.topic.name, b.q.partition, what)
			}
			return fmt.Errorf("%w: %d records for %s[%d] %s: %w", kerr.ErrTransactionAborted, len(b.recs), b.q.topic.name, b.q.partition, what, r.err)
		})
	}
	if idGen != s.txn.idGen {
		if s.inflight > 0 {
			return false // a late response of the last epoch; adopt after it
		}
		if r.dropAll && (r.state == txnAbortable || r.state == txnAborting) {
			// Dropped in the epoch they were numbered in, before the
			// new one numbers what is left from 0: renumbered first,
			// they would leave the new epoch's sequences past 0 with
			// nothing sent (Java fails them before it resets the
			// sequences, too).
			abort()
		}
		s.txn.idGen = idGen
		s.idem.pid, s.idem.epoch, s.idem.have = pid, epoch, true
		s.resequenceAll()
		s.p.log.Debug("transactional producer id", "producer_id", pid, "epoch", epoch)
	}
	switch r.state {
	case txnFatal:
		s.abortQueued(func(*batch) error { return r.err })
		return false
	case txnAbortable, txnAborting:
		abort()
	}
	return s.idem.have
}

// txnMayDrain: whether a partition's first batch b may be drained in this
// round; v1 partitions not in the transaction yet are collected to be
// added. Called with q.mu held, after the batch was seen in the deque.
// While the transaction is being aborted only batches sent before may go
// again (their outcome decides the sequence), never one that was not sent
// yet (Java's abortUndrainedBatches), and none at all once the
// coordinator has aborted the transaction: under the epoch it handed out
// then, a batch would start a transaction of its own.
func (s *sender) txnMayDrain(q *partq, b *batch) bool {
	r := &s.txn.round
	switch r.state {
	case txnInTransaction, txnCommitting:
	case txnAbortable, txnAborting:
		if r.dropAll || b.wire == nil {
			return false
		}
	default:
		return false
	}
	// The transaction may have ended and a new one begun since the
	// round's snapshot, and the batch be of the new one: a Send appends
	// only after BeginTransaction counted the new transaction, so seeing
	// its batch (under q.mu) and then the old number means it is not.
	if s.p.txn.gen.Load() != r.gen {
		return false // next round, with the new transaction's state
	}
	if r.v2 || q.txnGen.Load() == r.gen {
		return true
	}
	if r.state == txnInTransaction || r.state == txnCommitting {
		s.txn.need = append(s.txn.need, q)
	}
	return false
}

// txnAddNeeded hands the partitions collected by txnMayDrain to the
// AddPartitionsToTxn goroutine, starting it if it is not running.
func (s *sender) txnAddNeeded() {
	if len(s.txn.need) == 0 {
		return
	}
	t := s.p.txn
	t.mu.Lock()
	for _, q := range s.txn.need {
		if t.requested[q] != t.gen.Load() {
			t.requested[q] = t.gen.Load()
			t.toAdd = append(t.toAdd, q)
		}
	}
	start := len(t.toAdd) > 0 && !t.adding
	if start {
		t.adding = true
	}
	t.mu.Unlock()
	clear(s.txn.need)
	s.txn.need = s.txn.need[:0]
	if start {
		s.txn.wg.Add(1)
		live.Go()
		go func() {
			defer s.txn.wg.Done()
			defer live.Done()
			t.addLoop(s.forceCtx)
		}()
	}
}

// addLoop sends AddPartitionsToTxn for the partitions the sender asked
// for, one request at a time (those asked for meanwhile go in the next),
// until none is left or the transaction no longer wants them. ctx ends
// when the producer is closed by force.
func (t *txnManager) addLoop(ctx context.Context) {
	defer t.p.snd.wake()
	for {
		t.mu.Lock()
		parts, gen, idGen := t.toAdd, t.gen.Load(), t.idGen
		t.toAdd = nil
		if len(parts) == 0 || (t.state != txnInTransaction && t.state != txnCommitting) || ctx.Err() != nil {
			t.adding = false
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
		if err := t.acquire(ctx); err != nil {
			continue // ctx ended: the next turn ends the loop
		}
		err := t.addPartitions(ctx, parts, gen)
		t.release()
		switch {
		case err == nil:
			t.p.log.Debug("partitions added to the transaction", "transactional_id", t.id, "partitions", len(parts), "transaction", gen)
		case errors.Is(err, errAbandoned), ctx.Err() != nil:
		default:
			if t.acquire(ctx) != nil {
				t.fail(err)
				break
			}
			// Between the two turns at the coordinator, an abort (and a
			// recovery of its own) may have ended this transaction or
			// taken a new epoch: the error is then about one that is
			// over, and recovering again would bump the new epoch and
			// fail the next transaction for nothing.
			t.mu.Lock()
			stale := t.gen.Load() != gen || t.idGen != idGen
			t.mu.Unlock()
			if !stale {
				t.fail(t.recoverFenced(ctx, "AddPartitionsToTxn", err))
			}
			t.release()
		}
		t.p.snd.wake()
	}
}

// txnProduce makes a produce request transactional: it names the
// transactional id, and with transactions v1 stays below Produce v12,
// which would mean v2 (KIP-890). With v2, the first request of a
// transaction starts it on the coordinator.
func (s *sender) txnProduce(req *produceRequest) {
	t := s.p.txn
	req.txnID = &t.id
	r := &s.txn.round
	if !r.v2 {
		req.vcap = 11
		return
	}
	if s.txn.startedGen != r.gen {
		s.txn.startedGen = r.gen
		t.mu.Lock()
		if t.gen.Load() == r.gen && !t.started {
			t.started, t.begun = true, time.Now()
		}
		t.mu.Unlock()
	}
}

// abortTxnBatches fails the batches of transaction gen that were never
// sent (no sequence assigned), or all of its queued batches if all; the
// others stay, to be retried to completion. It stops if a newer
// transaction has begun since the round's snapshot: the old one then
// ended, after every batch of it completed, so what is queued is the new
// one's (a Send appends only after BeginTransaction counted it, hence the
// check under q.mu).
//
// A partition's callbacks keep their order: batches are failed from the
// front of its deque, and only while each is older than every batch of
// the partition in flight and is itself to be failed. What is behind an
// older batch still to finish (in flight, or a retry kept in the deque)
// is failed in a later round, once that batch completed; the sender runs
// one after every response.
func (s *sender) abortTxnBatches(gen uint64, all bool, why func(*batch) error) {
	oldest := map[*partq]*batch{} // the oldest batch in flight, by partition
	for b := range s.inFlightB {
		if o, ok := oldest[b.q]; !ok || older(b, o) {
			oldest[b.q] = b
		}
	}
	for _, q := range *s.p.acc.parts.Load() {
		q.mu.Lock()
		if s.p.txn.gen.Load() != gen {
			q.mu.Unlock()
			return
		}
		n := 0
		for ; n < len(q.batches); n++ {
			b := q.batches[n]
			if o := oldest[q]; (!all && b.wire != nil) || (o != nil && !older(b, o)) {
				break
			}
			b.full = true
		}
		if n == 0 {
			q.mu.Unlock()
			continue
		}
		drop := slices.Clone(q.batches[:n])
		clear(q.batches[:n])
		q.batches = q.batches[n:]
		q.mu.Unlock()
		for _, b := range drop {
			b.aborted = true
			s.complete(b, -1, -1, -1, why(b))
		}
	}
}

// txnRetry is idempotentRetry for a transactional producer, after Java's
// canRetry: errors that in an idempotent producer lead to an epoch bump
// fail the batch instead, which makes the transaction abortable; the
// abort then bumps the epoch at the coordinator.
func (s *sender) txnRetry(b *batch, rp *kmsg.ProduceResponseTopicPartition, be *kerr.BrokerError) bool {
	switch be.Code {
	case kerr.UnknownProducerID.Code:
		// Without the log start offset the broker may not know yet
		// whether our state is lost; wait for it.
		return rp.LogStartOffset < 0
	case kerr.OutOfOrderSequenceNumber.Code:
		// Not the sequence the broker expects next: an earlier batch is
		// being retried, or was written after all; retried (never
		// reordered). The next sequence refused is a real gap: the
		// batch fails and the transaction becomes abortable.
		q := b.q
		return q.suspectEnd < 0 && (b.renumbered || b.seq != q.lastAcked+1)
	case kerr.InvalidProducerEpoch.Code, kerr.ProducerFenced.Code:
		return false
	}
	return be.Retriable
}

// txnBatchFailed makes the transaction abortable when one of its batches
// failed (Java's maybeTransitionToErrorState), or fatal when the partition
// leader says a newer producer fenced us. A failed batch that had a
// sequence may leave a gap: the abort must then bump the epoch.
func (s *sender) txnBatchFailed(b *batch, err error) {
	if errors.Is(err, kerr.ErrTransactionAborted) {
		return // failed by the abort itself
	}
	t := s.p.txn
	var terr error
	switch {
	case errorsIsFatal(err):
		terr = err
	case isAuthorization(err):
		// As in Java: a principal not allowed to write transactionally
		// cannot go on with any transaction.
		terr = fmt.Errorf("%w: transactional.id %q: %d records for %s[%d] failed: %w", kerr.ErrFatal, t.id, len(b.recs), b.q.topic.name, b.q.partition, err)
	default:
		// INVALID_PRODUCER_EPOCH or PRODUCER_FENCED from a partition
		// leader is abortable too (KIP-588): the leader cannot tell a
		// newer producer from the coordinator's abort of a transaction
		// that outlived transaction.timeout.ms; the abort asks the
		// coordinator (recoverFenced).
		hint := ""
		if errorsIsCode(err, kerr.InvalidProducerEpoch.Code) || errorsIsCode(err, kerr.ProducerFenced.Code) {
			t.mu.Lock()
			begun := t.begun
			t.mu.Unlock()
			if timeout := s.p.cfg.TransactionTimeout; !begun.IsZero() && time.Since(begun) >= timeout {
				hint = fmt.Sprintf(" (the transaction has been open for %v, longer than transaction.timeout.ms %v: its coordinator has most likely aborted it)",
					time.Since(begun).Round(time.Millisecond), timeout)
			}
		}
		terr = fmt.Errorf("%w: %d records for %s[%d] failed%s: %w", kerr.ErrTransactionAbortable, len(b.recs), b.q.topic.name, b.q.partition, hint, err)
	}
	t.mu.Lock()
	if b.seq != noSeq {
		t.bump = true
	}
	t.failLocked(terr)
	t.mu.Unlock()
}
