package kprod

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kprod/kprod/internal/broker"
	"github.com/kprod/kprod/internal/recbatch"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// idempotence is the producer-id half of the Java client's
// TransactionManager, for the idempotent producer. It is owned by the
// sender goroutine; nothing here takes a lock.
//
// The broker keeps, per producer id, epoch and partition, the sequence
// numbers of the last 5 batches it appended. A batch's baseSequence is
// assigned when it is first drained and kept on every retry, so a retry
// of a batch that was in fact written is recognised as a duplicate
// (DUPLICATE_SEQUENCE_NUMBER, or a success with the original offset).
//
// Ordering with up to 5 requests in flight per partition: a retried batch
// (one that has a sequence) is sent again only when every batch before it
// is acknowledged, and the batches after it wait behind it in the deque;
// their own in-flight attempts fail with OUT_OF_ORDER_SEQUENCE_NUMBER,
// which is retried without further ado because an earlier batch is still
// unresolved (Java's TransactionManager.canRetry).
//
// Gaps: a batch that fails for good after it was sent (delivery timeout,
// a non-retriable error) leaves a hole in the partition's sequence that
// the broker would answer with OUT_OF_ORDER_SEQUENCE_NUMBER forever. The
// partition stops draining until its requests in flight are answered; if
// the last acknowledged sequence then covers the failed batch (it was
// written after all) nothing is done, otherwise the producer bumps its
// epoch (KIP-360: InitProducerId with the current id and epoch) and
// renumbers every unacknowledged batch from 0 in the new epoch. The same
// happens when the broker lost our state (UNKNOWN_PRODUCER_ID) or reports
// a real gap. The records after the gap are thus neither lost nor
// reordered; the failed batch's records get an error saying they may or
// may not have been written.
type idempotence struct {
	pid        int64
	epoch      int16
	have       bool      // pid and epoch are valid
	bumpNeeded bool      // renumber in a new epoch once nothing is in flight
	retryAt    time.Time // after a failed InitProducerId
	attempts   int
	fatal      error // InitProducerId failed for good; every batch fails with it
}

// noSeq marks a batch whose sequence is not assigned yet.
const noSeq = -1

// ensureProducerID gets a producer id before the first produce and bumps
// the epoch when a gap needs it. It blocks the sender for at most one
// request (request.timeout.ms), which is fine: nothing can be produced
// without an id. It returns false while produce must wait.
func (s *sender) ensureProducerID(now time.Time) bool {
	id := &s.idem
	if s.txn.on {
		return id.have // InitTransactions gets the id, at the transaction coordinator
	}
	if id.fatal != nil {
		return false
	}
	if id.have && !id.bumpNeeded {
		return true
	}
	if id.bumpNeeded && s.inflight > 0 {
		return false // wait until every request in flight is answered
	}
	if now.Before(id.retryAt) {
		return false
	}
	br := s.p.cl.LeastLoaded()
	if br == nil {
		s.p.cl.RequestRefresh()
		id.retryAt = now.Add(s.p.cfg.RetryBackoff) // not before metadata names a broker
		return false
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = math.MaxInt32 // no transaction
	req.ProducerID, req.ProducerEpoch = -1, -1
	bump := id.have && id.bumpNeeded
	if bump {
		if v, ok := br.Version(req.Key()); (ok && v >= 3) || !ok {
			// KIP-360: the broker bumps our epoch and keeps our id.
			req.ProducerID, req.ProducerEpoch = id.pid, id.epoch
		}
		if id.epoch == math.MaxInt16 {
			req.ProducerID, req.ProducerEpoch = -1, -1 // exhausted: a new id
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.p.cfg.RequestTimeout)
	stop := context.AfterFunc(s.forceCtx, cancel)
	resp, err := br.Do(ctx, req)
	stop()
	cancel()
	if err == nil {
		r := resp.(*kmsg.InitProducerIDResponse)
		if err = kerr.ForCode(r.ErrorCode); err == nil {
			old := id.epoch
			id.pid, id.epoch, id.have, id.bumpNeeded, id.attempts = r.ProducerID, r.ProducerEpoch, true, false, 0
			s.p.log.Debug("producer id", "producer_id", id.pid, "epoch", id.epoch, "bump", bump, "old_epoch", old)
			s.resequenceAll()
			return true
		}
	}
	if req.ProducerID >= 0 && errors.Is(err, kerr.InvalidProducerEpoch) {
		// The broker does not know our epoch any more: start afresh.
		id.have = false
	}
	// Only a broker's non-retriable answer is fatal; a connection that
	// broke or closed (the bootstrap one is closed once metadata names the
	// real brokers) is tried again on another broker.
	var be *kerr.BrokerError
	if errors.As(err, &be) && !be.Retriable && be.Code != kerr.InvalidProducerEpoch.Code && be.Code != kerr.ProducerFenced.Code {
		hint := ""
		if errors.Is(err, kerr.ClusterAuthorizationFailed) {
			hint = " (does the principal have IDEMPOTENT_WRITE on the cluster? else set enable.idempotence=false)"
		}
		id.fatal = fmt.Errorf("%w: InitProducerId failed: %w; the idempotent producer cannot produce%s", kerr.ErrFatal, err, hint)
		s.p.log.Error("idempotent producer cannot get a producer id", "err", err)
		return false
	}
	id.attempts++
	id.retryAt = now.Add(broker.Backoff(s.p.cfg.RetryBackoff, s.p.cfg.RetryBackoffMax, id.attempts-1))
	s.p.log.Debug("InitProducerId failed; retrying", "err", err, "backoff", time.Until(id.retryAt))
	return false
}

// resequenceAll starts every partition's sequence at 0 in the (new)
// epoch and renumbers its unacknowledged batches in order. Only called
// with nothing in flight, so every such batch is back in its deque.
func (s *sender) resequenceAll() {
	for _, q := range *s.p.acc.parts.Load() {
		q.nextSeq, q.lastAcked, q.suspectEnd = 0, -1, -1
		for _, b := range q.pending {
			b.seq = q.nextSeq
			q.nextSeq += int32(len(b.recs))
			if err := recbatch.SetProducerState(b.wire, s.idem.pid, s.idem.epoch, b.seq); err != nil {
				panic("kprod: resequencing a batch that is not sealed: " + err.Error()) // a bug, not an input error
			}
		}
	}
}

// sealIdempotent assigns the next sequence of its partition to a batch
// drained for the first time and seals it with the producer's id and
// epoch.
func (s *sender) sealIdempotent(q *partq, b *batch) {
	b.seq = q.nextSeq
	q.nextSeq += int32(len(b.recs))
	opts := s.p.acc.codecOpts
	opts.Idempotent = true
	opts.Transactional = s.txn.on
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = s.idem.pid, s.idem.epoch, b.seq
	b.wire = b.bld.Seal(opts)
	q.pending = append(q.pending, b)
}

// maxPendingPerPartition is how many batches with a sequence a partition
// may have unacknowledged: the broker remembers the last 5 per producer
// and partition, and recognises a retry as a duplicate only among them.
const maxPendingPerPartition = 5

// mayDrainIdempotent: a partition with a possible gap waits; a retried
// batch goes only when every batch before it is acknowledged; and a new
// batch goes only while no batch of the partition is being retried and
// fewer than 5 are unacknowledged. Otherwise new batches appended behind
// a retry would push the retried batch out of the broker's window of 5,
// and the broker would answer its retry with OUT_OF_ORDER_SEQUENCE_NUMBER
// instead of recognising the duplicate.
func (s *sender) mayDrainIdempotent(q *partq, b *batch) bool {
	if q.suspectEnd >= 0 {
		return false
	}
	if b.seq != noSeq {
		return len(q.pending) > 0 && q.pending[0] == b
	}
	if len(q.pending) >= maxPendingPerPartition {
		return false
	}
	for _, pb := range q.pending {
		if pb.attempts > 0 {
			return false
		}
	}
	return true
}

// resolveSuspect decides, once a partition with a possibly failed
// sequence has nothing in flight, whether the failed batches were written
// after all or left a gap that needs an epoch bump.
func (s *sender) resolveSuspect(q *partq) {
	if q.suspectEnd < 0 || q.inflight > 0 {
		return
	}
	if q.lastAcked < q.suspectEnd && !s.txn.on { // a transaction is made abortable instead (txnBatchFailed)
		s.p.log.Debug("sequence gap: bumping the epoch", "topic", q.topic.name, "partition", q.partition,
			"last_acked", q.lastAcked, "failed_up_to", q.suspectEnd)
		s.idem.bumpNeeded = true
	}
	q.suspectEnd = -1
}

// idempotentRetry is Java's canRetry for the idempotent producer: whether
// a failed attempt is retried, and whether it needs an epoch bump first.
func (s *sender) idempotentRetry(b *batch, rp *kmsg.ProduceResponseTopicPartition, be *kerr.BrokerError) bool {
	if s.txn.on {
		return s.txnRetry(b, rp, be)
	}
	q := b.q
	first := len(q.pending) > 0 && q.pending[0] == b
	switch be.Code {
	case kerr.UnknownProducerID.Code:
		// The broker lost our state (e.g. the log head was deleted by
		// retention). Without the log start offset, wait for it.
		if rp.LogStartOffset >= 0 {
			s.idem.bumpNeeded = true
		}
		return true
	case kerr.OutOfOrderSequenceNumber.Code:
		if first {
			s.idem.bumpNeeded = true // a real gap
		}
		return true // otherwise an earlier batch is being retried
	case kerr.InvalidProducerEpoch.Code:
		b.bumps++
		if b.bumps > 3 {
			return false
		}
		s.idem.bumpNeeded = true
		return true
	}
	return be.Retriable
}

// onBatchDone keeps the partition's sequence state when a batch with a
// sequence completes: acknowledged batches advance lastAcked; failed ones
// make the partition suspect until its in-flight requests are answered.
func (s *sender) onBatchDone(b *batch, err error) {
	if b.seq == noSeq {
		return
	}
	q := b.q
	for i, pb := range q.pending {
		if pb == b {
			q.pending = append(q.pending[:i], q.pending[i+1:]...)
			break
		}
	}
	end := b.seq + int32(len(b.recs)) - 1
	if err == nil {
		q.lastAcked = max(q.lastAcked, end)
		return
	}
	q.suspectEnd = max(q.suspectEnd, end)
}
