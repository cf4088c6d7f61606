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
// which is retried without further ado because they are not the next
// sequence the broker expects (Java's TransactionManager.canRetry).
//
// Gaps: a batch that fails for good after it was sent (delivery timeout,
// a non-retriable error) may leave a hole in the partition's sequence. The
// partition then sends no new batch until every batch it has sent is
// settled, its retries included (a retry's answer may prove the failed
// batch written after all). If the last acknowledged sequence then is the
// last one assigned, nothing is done; otherwise, as when the broker lost
// our state (UNKNOWN_PRODUCER_ID) or reports a real gap, the partition
// asks for an epoch bump. As in Java, the idempotent producer bumps its
// epoch itself (same producer id, epoch + 1; a new id only when the epoch
// is exhausted) once the partitions that asked have nothing in flight, and
// renumbers only their unacknowledged batches, from 0 in the new epoch.
// Every other partition keeps the id and epoch its batches were numbered
// in (partq.pid, partq.epoch) until they are all acknowledged, and only
// then starts at 0 in the new epoch: a batch that may have been written
// keeps the sequence the broker would recognise it by.
type idempotence struct {
	pid        int64
	epoch      int16
	have       bool      // pid and epoch are valid
	bumpNeeded bool      // some partition asked for a new epoch (partq.rewrite)
	retryAt    time.Time // after a failed InitProducerId
	attempts   int
	lastErr    error // of the last failed InitProducerId, while retrying; for expired records
	fatal      error // InitProducerId or a produce failed for good (maybeIdempotentFatal); every batch fails with it
}

// maybeIdempotentFatal makes an idempotent producer without a
// transactional.id fail for good after a produce refused with
// CLUSTER_AUTHORIZATION_FAILED or with no Produce version in common, as
// Java's TransactionManager.maybeTransitionToErrorState does for every
// idempotent producer: every later batch would fail the same way, each
// leaving a gap in its partition's sequences. The batch itself fails with
// that error; the ones queued, and those sent afterwards, with ErrFatal
// (a transactional producer fails its transaction instead, see
// txnManager). Called on the sender goroutine.
func (s *sender) maybeIdempotentFatal(err error) {
	if !s.idemOn || s.txn.on || s.idem.fatal != nil {
		return
	}
	hint := ""
	switch {
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		hint = "; does the principal have WRITE on the topic (or IDEMPOTENT_WRITE on the cluster)? else set enable.idempotence=false"
	case errors.Is(err, kerr.ErrUnsupportedVersion), errors.Is(err, kerr.UnsupportedVersion):
		// The cause says what to do (another compression.type, a newer
		// broker).
	default:
		return
	}
	s.idem.fatal = fmt.Errorf("%w: a produce request was refused: %w; the idempotent producer cannot produce, close it%s", kerr.ErrFatal, err, hint)
	s.p.log.Error("idempotent producer failed for good", "err", err)
}

// noSeq marks a batch whose sequence is not assigned yet.
const noSeq = -1

// wireSeq is a sequence as the record batch carries it. kprod counts a
// partition's sequences in an int64 that does not wrap, so that its
// comparisons (next, last acknowledged, a gap) stay plain; on the wire
// they wrap from Int32.MaxValue to 0, as Java's
// DefaultRecordBatch.incrementSequence and the broker have them. A
// producer that sends 2^31 records to one partition in one epoch (half
// an hour at a million records a second) gets there.
func wireSeq(seq int64) int32 { return int32(seq % (math.MaxInt32 + 1)) }

// ensureProducerID gets a producer id before the first produce and bumps
// the epoch when a partition needs it. It blocks the sender for at most
// one request (request.timeout.ms), which is fine: nothing can be produced
// without an id. It returns false while produce must wait; while a bump
// waits for the partitions that asked for it, the others go on.
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
	if id.have && !s.bumpReady() {
		return true // the partitions that asked wait (mayDrainIdempotent)
	}
	if id.have && id.epoch < math.MaxInt16 {
		// Java's bumpIdempotentProducerEpoch: no request; brokers take a
		// higher epoch whose sequences start at 0.
		id.epoch++
		s.p.log.Debug("producer epoch bumped", "producer_id", id.pid, "epoch", id.epoch)
		s.restartRewrites()
		return true
	}
	if now.Before(id.retryAt) {
		return id.have
	}
	br := s.p.cl.LeastLoaded()
	if br == nil {
		s.p.cl.RequestRefresh()
		id.retryAt = now.Add(s.p.cfg.RetryBackoff) // not before metadata names a broker
		return id.have
	}
	// The first id, or a new one when the epoch is exhausted: a producer
	// without a transactional.id always gets a fresh id, epoch 0.
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = math.MaxInt32 // no transaction
	req.ProducerID, req.ProducerEpoch = -1, -1
	ctx, cancel := context.WithTimeout(context.Background(), s.p.cfg.RequestTimeout)
	stop := context.AfterFunc(s.forceCtx, cancel)
	// A Close with nothing to deliver does not wait for the id (a broker
	// that accepts connections and never answers would hold it for
	// request.timeout.ms); Close refuses new records before it begins.
	stopClosing := context.AfterFunc(s.closingCtx, func() {
		if !s.p.acc.hasIncomplete() {
			cancel()
		}
	})
	resp, err := br.Do(ctx, req)
	stop()
	stopClosing()
	cancel()
	if err == nil {
		r := resp.(*kmsg.InitProducerIDResponse)
		if err = kerr.ForCode(r.ErrorCode); err == nil {
			old, hadID := id.pid, id.have
			id.pid, id.epoch, id.have, id.attempts, id.retryAt, id.lastErr = r.ProducerID, r.ProducerEpoch, true, 0, time.Time{}, nil
			s.p.log.Debug("producer id", "producer_id", id.pid, "epoch", id.epoch, "old_producer_id", old, "new_id_after_exhausted_epoch", hadID)
			s.restartRewrites()
			return true
		}
	}
	// Only a broker's non-retriable answer is fatal; a connection that
	// broke or closed (the bootstrap one is closed once metadata names the
	// real brokers) is tried again on another broker.
	var be *kerr.BrokerError
	if errors.As(err, &be) && !be.Retriable || errors.Is(err, kerr.ErrUnsupportedVersion) {
		hint := ""
		if errors.Is(err, kerr.ClusterAuthorizationFailed) {
			hint = " (does the principal have IDEMPOTENT_WRITE on the cluster? else set enable.idempotence=false)"
		}
		id.fatal = fmt.Errorf("%w: InitProducerId failed: %w; the idempotent producer cannot produce%s", kerr.ErrFatal, err, hint)
		s.p.log.Error("idempotent producer cannot get a producer id", "err", err)
		return false
	}
	id.attempts++
	id.lastErr = err
	id.retryAt = now.Add(broker.Backoff(s.p.cfg.RetryBackoff, s.p.cfg.RetryBackoffMax, id.attempts-1))
	s.p.log.Debug("InitProducerId failed; retrying", "err", err, "backoff", time.Until(id.retryAt))
	return id.have
}

// bumpReady reports whether every partition that asked for a new epoch
// has nothing in flight, so that its batches can be renumbered.
func (s *sender) bumpReady() bool {
	for _, q := range *s.p.acc.parts.Load() {
		if q.rewrite && q.inflight > 0 {
			return false
		}
	}
	return true
}

// requestBump is Java's requestIdempotentEpochBumpForPartition: q's
// batches are renumbered in the next epoch once it has nothing in flight.
func (s *sender) requestBump(q *partq) {
	q.rewrite = true
	s.idem.bumpNeeded = true
}

// restartRewrites renumbers, in the producer's current id and epoch, the
// partitions that asked for it (all of them for a fresh id) and clears
// the bump request.
func (s *sender) restartRewrites() {
	for _, q := range *s.p.acc.parts.Load() {
		if q.rewrite {
			s.restartSequences(q)
		}
	}
	s.idem.bumpNeeded = false
}

// resequenceAll starts every partition's sequence at 0 in the (new)
// epoch and renumbers its unacknowledged batches in order: the
// transactional producer's new id or epoch, taken only with nothing in
// flight, so every such batch is back in its deque.
func (s *sender) resequenceAll() {
	for _, q := range *s.p.acc.parts.Load() {
		s.restartSequences(q)
	}
}

// restartSequences is Java's startSequencesAtBeginning: q's unacknowledged
// batches (none in flight) are renumbered from 0 in the producer's current
// id and epoch, which become q's.
func (s *sender) restartSequences(q *partq) {
	q.pid, q.epoch = s.idem.pid, s.idem.epoch
	q.nextSeq, q.lastAcked, q.suspectEnd, q.rewrite = 0, -1, -1, false
	for _, b := range q.pending {
		b.seq = q.nextSeq
		b.renumbered = true
		q.nextSeq += int64(len(b.recs))
		if err := recbatch.SetProducerState(b.wire, q.pid, q.epoch, wireSeq(b.seq)); err != nil {
			panic("kprod: resequencing a batch that is not sealed: " + err.Error()) // a bug, not an input error
		}
	}
}

// sealIdempotent assigns the next sequence of its partition to a batch
// drained for the first time and seals it with the producer's id and
// epoch.
func (s *sender) sealIdempotent(q *partq, b *batch) {
	if q.stale(&s.idem) {
		// Every batch numbered in the old id or epoch is acknowledged
		// (mayDrainIdempotent waited for that): start afresh in the
		// producer's current ones (Java's maybeUpdateProducerIdAndEpoch).
		s.restartSequences(q)
	}
	b.seq = q.nextSeq
	q.nextSeq += int64(len(b.recs))
	opts := s.p.acc.codecOpts
	opts.Idempotent = true
	opts.Transactional = s.txn.on
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = q.pid, q.epoch, wireSeq(b.seq)
	b.wire = b.bld.Seal(opts)
	q.pending = append(q.pending, b)
}

// maxPendingPerPartition is how many batches with a sequence a partition
// may have unacknowledged: the broker remembers the last 5 per producer
// and partition, and recognises a retry as a duplicate only among them.
const maxPendingPerPartition = 5

// mayDrainIdempotent is Java's shouldStopDrainBatchesForPartition,
// inverted. A partition waiting for its epoch bump sends nothing. A
// retried batch goes only when every batch before it is acknowledged, even
// while a gap is suspected (its answer may settle it). A new batch waits
// while a gap is suspected, while batches numbered in an older id or epoch
// are unacknowledged, while a batch of the partition is being retried,
// while the partition's first batch of the epoch is unacknowledged (which
// Java does not check), and while 5 are unacknowledged: otherwise new
// batches appended behind a
// retry would push the retried batch out of the broker's window of 5, and
// the broker would answer its retry with OUT_OF_ORDER_SEQUENCE_NUMBER
// instead of recognising the duplicate.
func (s *sender) mayDrainIdempotent(q *partq, b *batch) bool {
	if q.rewrite {
		return false
	}
	if b.seq != noSeq {
		return len(q.pending) > 0 && q.pending[0] == b
	}
	if q.suspectEnd >= 0 || len(q.pending) >= maxPendingPerPartition {
		return false
	}
	if q.lastAcked < 0 && q.ackedPID != q.pid && len(q.pending) > 0 {
		// Nothing of the partition acknowledged under this producer id
		// yet: one batch at a time. A broker with no state for the
		// producer takes any sequence as its first: had the first
		// batch been refused (a partition just created or moving,
		// NOT_LEADER) and the next one written, the first would come
		// back OUT_OF_ORDER_SEQUENCE_NUMBER as the next sequence, a gap
		// whose epoch bump writes the next one again, after it. (In a
		// later epoch of a known producer id the broker wants sequence
		// 0 first, so the check is not needed there.) Costs one round
		// trip per partition and producer id.
		return false
	}
	if len(q.pending) > 0 && q.stale(&s.idem) {
		return false
	}
	for _, pb := range q.pending {
		if pb.attempts > 0 {
			return false
		}
	}
	return true
}

// stale reports whether q's sequences are numbered in another producer id
// or epoch than the producer's current ones.
func (q *partq) stale(id *idempotence) bool {
	return q.pid != id.pid || q.epoch != id.epoch
}

// resolveSuspect is Java's maybeResolveSequences: once a partition with a
// possibly failed sequence has no unacknowledged batch left (in flight or
// waiting to be retried), it decides whether the failed batches were
// written after all (the last acknowledged sequence is the last one
// assigned) or left a gap that needs an epoch bump. Called for every
// partition in every sendReady round, and after a queued batch expires.
func (s *sender) resolveSuspect(q *partq) {
	// inflight also counts a batch failed by delivery.timeout.ms while in
	// flight, until its request is answered.
	if q.suspectEnd < 0 || len(q.pending) > 0 || q.inflight > 0 {
		return
	}
	if q.lastAcked+1 != q.nextSeq && !s.txn.on { // a transaction is made abortable instead (txnBatchFailed)
		s.p.log.Debug("sequence gap: bumping the epoch", "topic", q.topic.name, "partition", q.partition,
			"last_acked", q.lastAcked, "next", q.nextSeq, "failed_up_to", q.suspectEnd)
		s.requestBump(q)
	}
	q.suspectEnd = -1
}

// idempotentRetry is Java's canRetry for the idempotent producer: whether
// a failed attempt is retried, and whether its partition needs an epoch
// bump first.
func (s *sender) idempotentRetry(b *batch, rp *kmsg.ProduceResponseTopicPartition, be *kerr.BrokerError) bool {
	if s.txn.on {
		return s.txnRetry(b, rp, be)
	}
	q := b.q
	// A bump renumbers every unacknowledged batch of the partition, so it
	// is asked for only by the first of them: a batch before it, being
	// retried, may have been written, and must settle first (under a new
	// number the broker would take it as new). Java's canRetry does not
	// check this.
	first := len(q.pending) > 0 && q.pending[0] == b
	switch be.Code {
	case kerr.UnknownProducerID.Code:
		// The broker lost our state (e.g. the log head was deleted by
		// retention). Without the log start offset, wait for it; a batch
		// already renumbered after such a loss is just retried.
		if rp.LogStartOffset >= 0 && !b.renumbered && first {
			s.requestBump(q)
		}
		return true
	case kerr.OutOfOrderSequenceNumber.Code:
		if q.suspectEnd < 0 && (b.renumbered || b.seq != q.lastAcked+1) {
			// Not the sequence the broker expects next: an earlier
			// batch is being retried, or was written after all and this
			// one will be refused until it fails (never reordered).
			return true
		}
		if first && (q.suspectEnd < 0 || b.seq == q.suspectEnd+1) {
			s.requestBump(q) // a real gap
		}
		return true
	case kerr.InvalidProducerEpoch.Code:
		// As in Java: the batch fails (an earlier attempt may have been
		// written, so renumbering it could write it twice) and the
		// partition goes on in a new epoch; if batches before it are
		// unsettled, the gap it leaves is decided once they are
		// (resolveSuspect).
		if first {
			s.requestBump(q)
		}
		return false
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
	end := b.seq + int64(len(b.recs)) - 1
	if err == nil {
		q.lastAcked = max(q.lastAcked, end)
		q.ackedPID = q.pid
		return
	}
	q.suspectEnd = max(q.suspectEnd, end)
}
