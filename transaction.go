package kprod

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kprod/kprod/internal/broker"
	"github.com/kprod/kprod/kerr"
)

// Transactions (transactional.id) follow the Java client's KafkaProducer
// and TransactionManager:
//
//	p.InitTransactions(ctx)          // once: fences older producers with the id
//	for {
//		p.BeginTransaction()
//		p.Send(ctx, rec, cb) ...      // only inside a transaction
//		p.SendOffsetsToTransaction(ctx, offsets, group) // consume-transform-produce
//		err := p.CommitTransaction(ctx)
//		for errors.Is(err, ErrTransactionTimeout) && ctx.Err() == nil {
//			err = p.CommitTransaction(ctx) // outcome not known yet
//		}
//		if err != nil {
//			if errors.Is(err, ErrFatal) { close the producer }
//			p.AbortTransaction(ctx)   // e.g. ErrTransactionAbortable
//		}
//	}
//
// The state machine is Java's: uninitialized → initializing → ready →
// in transaction → committing / aborting → ready, with two error states.
// An abortable error (ErrTransactionAbortable: a record of the transaction
// failed, the coordinator answered TRANSACTION_ABORTABLE, ...) fails the
// commit and every Send until AbortTransaction; the producer then goes
// on. A fatal error (ErrFatal; ErrProducerFenced when a newer producer with
// the same transactional.id exists) fails every later call: close the
// producer. Calling a method in a state that does not allow it returns
// ErrTransactionState and changes nothing.
//
// Protocol. InitTransactions finds the transaction coordinator
// (FindCoordinator, key type 1) and sends it InitProducerId with the
// transactional.id and transaction.timeout.ms; the producer id and epoch
// it returns are the ones the sender seals batches with (the idempotent
// producer's own InitProducerId is not used). Two ways to run a
// transaction exist, and InitTransactions picks one:
//
//   - transactions v2 (KIP-890 part 2), when the coordinator's finalized
//     feature transaction.version is >= 2 (the default of Kafka 4.x
//     clusters): Produce v12+ adds a partition to the transaction
//     implicitly, TxnOffsetCommit v5 adds the group implicitly, and EndTxn
//     v5 bumps the epoch on every commit or abort (the response carries
//     the new one, and sequences start again at 0).
//   - transactions v1 otherwise: before a partition's first batch is
//     drained, the sender has it added with AddPartitionsToTxn (v3 at most;
//     v4+ is the brokers' batched form); SendOffsetsToTransaction sends
//     AddOffsetsToTxn first; Produce is capped at v11, EndTxn at v4 and
//     TxnOffsetCommit at v4, as KIP-890 requires of a v1 client. The epoch
//     stays across transactions; an abort after a failed batch bumps it
//     (InitProducerId with the current id and epoch, KIP-360) because the
//     failed batch's sequence may be unresolved.
//
// InitTransactions, SendOffsetsToTransaction, CommitTransaction and
// AbortTransaction block at most until their ctx ends or max.block.ms has
// passed, as Java's do; after either, calling the method again resumes
// where it stopped.
//
// Requests to coordinators are serialized, one at a time, as in Java.
// Retriable coordinator answers are retried with retry.backoff.ms growing
// to retry.backoff.max.ms: NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE
// (and a broken connection) after finding the coordinator again,
// COORDINATOR_LOAD_IN_PROGRESS and CONCURRENT_TRANSACTIONS as they are.
//
// Lock order: txnManager.appendMu before txnManager.mu; partq.mu and the
// accumulator's locks are never held while taking txnManager.mu, except
// that the sender's round reads txnManager.mu with no other lock held.
type txnManager struct {
	p  *Producer
	id string

	// appendMu is held for reading by Send from its state check through
	// its append, and for writing by the transitions out of "in
	// transaction" that the user starts (commit, abort), so that every
	// record appended in the transaction is covered by the commit's flush
	// or the abort's wait. The sender never waits for it (a callback's
	// Send only tries it, ahead of a writer that waits, beginSend): a
	// record appended while the sender makes the transaction abortable
	// is failed by the sender's next round. A commit's wait for it ends
	// with its ctx (appendGate).
	appendMu appendGate

	// sem serializes requests to coordinators (one at a time, as the
	// Java client does): capacity 1, held across one operation's retries.
	sem chan struct{}
	// late is the last coordinator request given up on while on the wire
	// (its ctx ended): it yields the request's outcome once it is over
	// there; lateOp and lateGen say which request, of which transaction.
	// Guarded by sem. The next request waits for it (awaitLate); a retry
	// of the same request in the same transaction takes its answer as
	// its own (Java's retried commit or abort awaits the first one's
	// result), so that a commit that went through is not sent again,
	// where a newer producer could have fenced it meanwhile.
	late    <-chan broker.Late
	lateOp  string
	lateGen uint64
	// acquiring counts the callers waiting in acquire (tests wait for a
	// caller to get there).
	acquiring atomic.Int32
	// commits counts the CommitTransaction calls under way: Close lets
	// them finish rather than abort their transaction.
	commits atomic.Int32

	mu     sync.Mutex
	state  txnState
	err    error            // why the state is txnAbortable or txnFatal
	coord  int32            // transaction coordinator's node id, -1 unknown
	groups map[string]int32 // group coordinators by group id
	pid    int64
	epoch  int16
	idGen  uint64 // bumped whenever pid/epoch change; the sender adopts them
	v2     bool   // transactions v2 (KIP-890 part 2)
	// gen numbers the transactions: the current (or last) one. Written
	// under mu by BeginTransaction; read without it by the sender,
	// which must not drain a batch of a transaction newer than its
	// round's snapshot.
	gen     atomic.Uint64
	started bool // the coordinator has the transaction: something was added (v1) or sent (v2)
	// maybeStarted (v1): an AddPartitionsToTxn or AddOffsetsToTxn went
	// out, so the coordinator may have the transaction even if no answer
	// said so (lost, or the call gave up): without started, the abort
	// bumps the epoch.
	maybeStarted bool
	begun        time.Time
	bump         bool // abort must bump the epoch (v1): a batch with a sequence failed
	endSent      bool // EndTxn(commit) was sent: only a retried commit can learn the outcome
	// aborted: the coordinator has aborted the transaction and we hold
	// its current epoch (recoverFenced); the abort has nothing left to
	// ask of it.
	aborted bool
	// ended is the last transaction (gen) that complete ended, and
	// endedCommitted how: a commit or abort that waited for its turn
	// while another call ended its transaction returns that outcome
	// instead of ending the next one.
	ended          uint64
	endedCommitted bool

	// v1 AddPartitionsToTxn, run by one goroutine at a time (adding)
	// that the sender starts; requested remembers in which transaction a
	// partition was asked for, so that it is asked for once.
	toAdd     []*partq
	requested map[*partq]uint64
	adding    bool

	forceV1 bool // tests: use transactions v1 even if the cluster has v2
}

type txnState uint8

const (
	txnUninitialized txnState = iota
	txnInitializing
	txnReady
	txnInTransaction
	txnCommitting
	txnAborting
	txnAbortable // an abortable error: only AbortTransaction is allowed
	txnFatal
)

func (s txnState) String() string {
	switch s {
	case txnUninitialized:
		return "not initialized (call InitTransactions)"
	case txnInitializing:
		return "initializing (InitTransactions did not finish; call it again)"
	case txnReady:
		return "ready (no transaction; call BeginTransaction)"
	case txnInTransaction:
		return "in a transaction"
	case txnCommitting:
		return "committing (CommitTransaction did not finish; call it again)"
	case txnAborting:
		return "aborting (AbortTransaction did not finish; call it again)"
	case txnAbortable:
		return "failed with an abortable error (call AbortTransaction)"
	default:
		return "failed with a fatal error"
	}
}

// Offset is a consumer position to commit in a transaction, Java's
// OffsetAndMetadata: Offset is the next record to consume (the last
// processed offset + 1).
type Offset struct {
	Offset int64
	// LeaderEpoch is the leader epoch of the last processed record, as
	// the consumer saw it; 0 is a valid epoch, so set -1 if unknown
	// (NewOffset does): consumers that resume from a committed epoch
	// check their position against it.
	LeaderEpoch int32
	Metadata    string
}

// NewOffset is the Offset of the next record to consume with no leader
// epoch (-1) and no metadata, as Java's OffsetAndMetadata(offset).
func NewOffset(offset int64) Offset {
	return Offset{Offset: offset, LeaderEpoch: -1}
}

// GroupMetadata identifies the consumer group (and the member of it) whose
// offsets a transaction commits, Java's ConsumerGroupMetadata. Pass what
// the consumer reports, so that the group coordinator can fence a zombie
// member (KIP-447). For offsets not tied to a live member use
// NewGroupMetadata.
type GroupMetadata struct {
	GroupID string
	// GenerationID is the group generation; -1 if unknown (as
	// NewGroupMetadata sets it).
	GenerationID int32
	// MemberID is the member's id; "" if unknown.
	MemberID string
	// GroupInstanceID is the static member id (group.instance.id); ""
	// if none.
	GroupInstanceID string
}

// NewGroupMetadata is the GroupMetadata of a group without member
// information (generation -1, no member id), as Java's
// ConsumerGroupMetadata(groupId).
func NewGroupMetadata(groupID string) GroupMetadata {
	return GroupMetadata{GroupID: groupID, GenerationID: -1}
}

func newTxnManager(p *Producer) *txnManager {
	return &txnManager{
		p:         p,
		id:        p.cfg.TransactionalID,
		sem:       make(chan struct{}, 1),
		coord:     -1,
		groups:    map[string]int32{},
		pid:       -1,
		epoch:     -1,
		requested: map[*partq]uint64{},
	}
}

func (p *Producer) txnOrErr(op string) (*txnManager, error) {
	if p.txn == nil {
		return nil, fmt.Errorf("%w: %s needs a transactional.id; this producer has none", kerr.ErrTransactionState, op)
	}
	if p.closed.Load() {
		return nil, fmt.Errorf("%s: %w", op, kerr.ErrClosed)
	}
	return p.txn, nil
}

// stateErrLocked is the error of calling op in the current state: the
// fatal or abortable error if there is one, else ErrTransactionState.
func (t *txnManager) stateErrLocked(op string) error {
	switch t.state {
	case txnFatal:
		return t.err
	case txnAbortable:
		return fmt.Errorf("%s: %w", op, t.err)
	}
	return fmt.Errorf("%w: %s is not allowed while the producer is %s", kerr.ErrTransactionState, op, t.state)
}

// InitTransactions prepares a transactional producer; call it once,
// before the first transaction. It finds the transaction coordinator of
// transactional.id and gets the producer id and epoch from it: this fences
// every older producer with the same transactional.id (their next request
// fails with ErrProducerFenced) and completes or aborts the transaction
// such a producer left open, so that a new producer starts clean.
//
// It retries what is retriable until ctx ends; if ctx ends first, call it
// again. ErrFatal (e.g. transaction.timeout.ms above the broker's
// transaction.max.timeout.ms) means the producer must be closed; an
// authorization error (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) leaves it
// uninitialized, so it can be called again once the ACL is fixed.
func (p *Producer) InitTransactions(ctx context.Context) (err error) {
	defer timeCall(&p.metrics.txnInitNs, time.Now(), &err)
	t, err := p.txnOrErr("InitTransactions")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.MaxBlock)
	defer cancel()
	t.mu.Lock()
	if t.state != txnUninitialized && t.state != txnInitializing {
		err := t.stateErrLocked("InitTransactions")
		t.mu.Unlock()
		return err
	}
	t.state = txnInitializing
	t.mu.Unlock()

	if err := t.acquire(ctx); err != nil {
		return cutShort(ctx, "InitTransactions", err)
	}
	defer t.release()
	// A concurrent InitTransactions may have finished while this one
	// waited: then this one has nothing to do (as Java's, which returns
	// the pending result), and must not undo a transaction begun since.
	t.mu.Lock()
	if t.state != txnInitializing {
		var err error
		if t.state != txnReady {
			err = t.stateErrLocked("InitTransactions")
		}
		t.mu.Unlock()
		return err
	}
	t.mu.Unlock()
	v2, err := t.detectV2(ctx)
	if err == nil {
		var pid int64
		var epoch int16
		if pid, epoch, err = t.initProducerID(ctx, -1, -1); err == nil {
			return t.initDone(pid, epoch, v2)
		}
	}
	if ctx.Err() != nil && !errorsIsFatal(err) && !isAuthorization(err) {
		return cutShort(ctx, "InitTransactions", err)
	}
	return t.initFailed(err)
}

// initDone is InitTransactions' success: the producer id and epoch the
// coordinator handed out, and whether transactions v2 are used.
func (t *txnManager) initDone(pid int64, epoch int16, v2 bool) error {
	p := t.p
	t.mu.Lock()
	t.pid, t.epoch, t.v2 = pid, epoch, v2
	t.idGen++
	t.state = txnReady
	t.mu.Unlock()
	p.log.Info("transactions initialized", "transactional_id", t.id, "producer_id", pid, "epoch", epoch, "transactions_v2", v2)
	p.snd.wake()
	return nil
}

// cutShort is the error of a transactional call whose ctx (or
// max.block.ms) ended while it waited for the coordinator: the outcome is
// not known yet, and calling it again goes on where it stopped. Other
// errors that are neither fatal nor abortable say the same: they were
// retried until then.
func cutShort(ctx context.Context, op string, err error) error {
	if errors.Is(err, kerr.ErrClosed) {
		// Close ended the producer: calling again cannot help.
		return fmt.Errorf("%s: %w", op, err)
	}
	if ctx.Err() == nil {
		// Not cut short: an error retried as far as it could be.
		return fmt.Errorf("%s: %w; it was retried as long as it could be, and the outcome is not known: call %s again", op, err, op)
	}
	return fmt.Errorf("%s: %w: %w; its ctx or max.block.ms ended before the coordinator answered: the outcome is not known yet, call %s again", op, kerr.ErrTransactionTimeout, err, op)
}

// waitEnded marks err, from a transactional call's wait (for records, or
// for the previous coordinator request), as that call cut short by its
// ctx or max.block.ms (ErrTransactionTimeout): nothing was decided yet.
func waitEnded(ctx context.Context, err error) error {
	if ctx.Err() == nil || errors.Is(err, kerr.ErrClosed) {
		return err
	}
	return fmt.Errorf("%w: %w", kerr.ErrTransactionTimeout, err)
}

func (t *txnManager) initFailed(err error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case isAuthorization(err):
		t.state = txnUninitialized // as Java: retry once the ACL is fixed
		// Not ErrFatal, which FindCoordinator's refusal wraps: the
		// producer is not done for, a caller that closes on ErrFatal
		// would close one that works once the ACL is fixed.
		var be *kerr.BrokerError
		errors.As(err, &be)
		return fmt.Errorf("InitTransactions: transactional.id %q: %w; grant the ACL (WRITE on the transactional id, IDEMPOTENT_WRITE on the cluster) and call InitTransactions again", t.id, be)
	case errorsIsFatal(err):
		t.state, t.err = txnFatal, err
	case errorsIsAbortable(err):
		// There is no transaction to abort yet: the producer is still
		// initializing, and only InitTransactions goes on.
		var be *kerr.BrokerError
		if errors.As(err, &be) {
			return fmt.Errorf("InitTransactions: transactional.id %q: %w; the producer is not initialized yet: call InitTransactions again", t.id, be)
		}
		// (Not wrapped: it wraps ErrTransactionAbortable, which would say
		// to abort. Every abortable answer carries a BrokerError above.)
		return fmt.Errorf("InitTransactions: %v; the producer is not initialized yet: call InitTransactions again", err)
	}
	return fmt.Errorf("InitTransactions: %w", err)
}

// BeginTransaction starts a transaction: until CommitTransaction or
// AbortTransaction, the records sent belong to it. It does no I/O; the
// coordinator learns of the transaction with its first partition or
// offsets.
func (p *Producer) BeginTransaction() (err error) {
	defer timeCall(&p.metrics.txnBeginNs, time.Now(), &err)
	t, err := p.txnOrErr("BeginTransaction")
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != txnReady {
		return t.stateErrLocked("BeginTransaction")
	}
	t.state = txnInTransaction
	t.gen.Add(1)
	t.started, t.maybeStarted, t.begun, t.bump, t.endSent, t.aborted = false, false, time.Time{}, false, false, false
	return nil
}

// checkSend is Send's check on a transactional producer: records
// may be sent only inside a transaction.
func (t *txnManager) checkSend(topic string) (gen uint64, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state == txnInTransaction {
		return t.gen.Load(), nil
	}
	switch t.state {
	case txnFatal:
		return 0, fmt.Errorf("cannot send to %q: %w", topic, t.err)
	case txnAbortable:
		return 0, fmt.Errorf("cannot send to %q: %w", topic, t.err)
	}
	return 0, fmt.Errorf("%w: cannot send to %q: a transactional producer sends only inside a transaction (BeginTransaction ... CommitTransaction), and it is %s",
		kerr.ErrTransactionState, topic, t.state)
}

// sendFailed makes the transaction abortable when a record sent in it
// failed before it was buffered (too large, no metadata or no memory
// within max.block.ms, its ctx ended, ...), as the Java client's send
// does: committing without it would break the transaction's all or
// nothing. A Send refused because no transaction is open, or because this
// one already failed, or the producer is closed, changes nothing; so does
// one whose transaction gen ended before it failed (it waited for
// metadata while the transaction was committed): it never joined that
// transaction, and the next one is not its business; nor does one whose
// ctx ended while it waited at appendMu (txnGateWaitError), which
// beginSend settled when the wait ended. Gen 0 is a record
// refused before it was checked against the transaction (no topic, its
// serializer failed): it belongs to the transaction open at the time,
// if one is, and not to one being committed, which a valid record sent
// then would not have joined either. Once the commit's EndTxn is sent,
// no Send changes the transaction.
func (t *txnManager) sendFailed(r *Record, gen uint64, err error, silent bool) {
	if gen != 0 && t.gen.Load() != gen {
		return
	}
	if errors.Is(err, kerr.ErrTransactionState) || errors.Is(err, kerr.ErrClosed) ||
		// A Send that an abort stopped (bufferPool.refuseWaits): its
		// transaction is aborted already, and failing now could reach
		// the next one.
		errors.Is(err, kerr.ErrTransactionAborted) ||
		errorsIsAbortable(err) || errorsIsFatal(err) ||
		// A record refused for itself, as Java's ProducerRecord and
		// serializers refuse it before the transaction sees it (they
		// throw from send): the transaction's other records stay
		// committable. Only if the caller learns of it, though: with no
		// callback (silent) nobody would, where Java's throw cannot go
		// unseen, and the commit would go through without the record.
		!silent && (errors.Is(err, kerr.ErrInvalidRecord) || errors.Is(err, kerr.ErrSerialization)) {
		return
	}
	topic := "(no topic)"
	if r != nil {
		topic = fmt.Sprintf("%q", r.Topic)
	}
	aerr := abortableErr("Send", fmt.Errorf("a record for %s failed before it was buffered: %w", topic, err))
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case gen == 0 && t.state != txnInTransaction:
	case errors.As(err, new(*txnGateWaitError)):
		// beginSend decided it when the wait ended, and failed the
		// transaction then if the record had joined it.
	case t.state == txnCommitting && t.endSent:
		// EndTxn(commit) is out: the coordinator decides the outcome,
		// which a CommitTransaction called again must learn. Making
		// the transaction abortable would contradict a commit that
		// read_committed consumers may already see.
	case gen == 0 || t.gen.Load() == gen: // again under mu, which BeginTransaction holds
		t.failLocked(aerr)
	}
}

// beginSend is called by Send right before it appends: on success it
// holds appendMu for reading, which Send releases after the append, so
// that a commit or abort waits for the append. While a commit or abort
// holds appendMu or waits for it, the Send waits too, until ctx ends.
// gen is the transaction the record was sent in (checkSend).
func (t *txnManager) beginSend(ctx context.Context, topic string, gen uint64) error {
	switch {
	case t.appendMu.TryRLock():
	case t.p.snd.onGoroutine(): // (only when a commit or abort is under way)
		// On the sender goroutine (a callback) waiting could stall every
		// delivery: the commit may itself wait for a Send that waits for
		// memory, which only that goroutine frees. Only a commit or
		// abort that holds appendMu has ended the transaction for this
		// record; one still waiting for it (and that may give up when
		// its ctx ends, the transaction still open) comes after it, as
		// it would after a Send of another goroutine that got in first.
		// The append does not wait for memory here, so the commit is
		// held up for a moment only.
		if !t.appendMu.TryRLockUnlessHeld() {
			return fmt.Errorf("%w: cannot send to %q from a callback while CommitTransaction or AbortTransaction ends the transaction; send it after the next BeginTransaction", kerr.ErrTransactionState, topic)
		}
	default:
		if err := t.appendMu.RLock(ctx); err != nil {
			return t.gateWaitEnded(topic, gen, err)
		}
	}
	if _, err := t.checkSend(topic); err != nil {
		t.appendMu.RUnlock()
		return err
	}
	return nil
}

// gateWaitEnded is beginSend's ctx ending while it waited at appendMu.
// What the record was to the transaction is decided here, under one
// hold of mu: if the transaction it was sent in (gen) is still open, a
// commit or abort only waited (and may give up, the transaction staying
// open), and the record failed in it, which can no longer commit, as for
// any Send whose ctx ended (sendFailed). Otherwise a commit or abort had
// taken that transaction, or ended it, and the record changes nothing.
func (t *txnManager) gateWaitEnded(topic string, gen uint64, err error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	werr := &txnGateWaitError{topic: topic, err: err}
	switch {
	case t.gen.Load() != gen:
		werr.why = gateWaitEnded
	case t.state == txnInTransaction:
		werr.why = gateWaitJoined
		t.failLocked(abortableErr("Send", fmt.Errorf("a record for %q failed before it was buffered: %w", topic, werr)))
	default:
		werr.why = gateWaitTaken
	}
	return werr
}

// txnGateWaitError is a transactional Send's ctx that ended while the
// Send waited for a CommitTransaction or AbortTransaction to take
// appendMu and let it go; why says what the record was to the
// transaction it was sent in (gateWaitEnded decides it once).
type txnGateWaitError struct {
	topic string
	err   error // ctx's
	why   gateWait
}

type gateWait uint8

const (
	// The transaction was still open (the commit or abort only
	// waited): the record failed in it, which can no longer commit.
	gateWaitJoined gateWait = iota
	// The commit or abort had taken the transaction: the record is
	// not part of it.
	gateWaitTaken
	// The transaction the record was sent in had ended (and another
	// may have begun): the record is part of neither.
	gateWaitEnded
)

func (e *txnGateWaitError) Error() string {
	switch e.why {
	case gateWaitJoined:
		return fmt.Sprintf("the Send's ctx ended while it waited for the CommitTransaction or AbortTransaction under way; the record for %q was not sent, in a transaction still open then, which can no longer be committed: abort it: %v", e.topic, e.err)
	case gateWaitTaken:
		return fmt.Sprintf("the Send's ctx ended while it waited for the CommitTransaction or AbortTransaction under way, which had taken the transaction; the record for %q was not sent and is not part of it: send it in the next transaction: %v", e.topic, e.err)
	}
	return fmt.Sprintf("the Send's ctx ended while it waited for the CommitTransaction or AbortTransaction under way; the transaction the record for %q was sent in had ended by then, and the record was not sent and is not part of any transaction: send it in the next one: %v", e.topic, e.err)
}

func (e *txnGateWaitError) Unwrap() error { return e.err }

// SendOffsetsToTransaction adds consumer offsets to the current
// transaction: they are committed for group if and only if the
// transaction commits (the consume-transform-produce loop of exactly-once
// processing). offsets maps topic → partition → the next offset to
// consume.
//
// Transactions v1 send AddOffsetsToTxn to the transaction coordinator,
// then TxnOffsetCommit to the group coordinator; v2 only the latter. An
// error that wraps ErrTransactionAbortable (e.g. the group generation is
// stale: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID) means: abort. If ctx ends
// before the offsets are known to be written, the transaction is made
// abortable too, as its offsets are then uncertain.
func (p *Producer) SendOffsetsToTransaction(ctx context.Context, offsets map[string]map[int32]Offset, group GroupMetadata) (err error) {
	defer timeCall(&p.metrics.txnSendOffsetsNs, time.Now(), &err)
	t, err := p.txnOrErr("SendOffsetsToTransaction")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.MaxBlock)
	defer cancel()
	if group.GroupID == "" {
		return fmt.Errorf("%w: SendOffsetsToTransaction: the group id is empty", kerr.ErrTransactionState)
	}
	t.mu.Lock()
	if t.state != txnInTransaction {
		err := t.stateErrLocked("SendOffsetsToTransaction")
		t.mu.Unlock()
		return err
	}
	gen := t.gen.Load()
	t.mu.Unlock()
	n := 0
	for _, ps := range offsets {
		n += len(ps)
	}
	if n == 0 {
		return nil
	}
	if err := t.acquire(ctx); err != nil {
		return fmt.Errorf("SendOffsetsToTransaction: %w; the offsets were not sent: call it again", waitEnded(ctx, err))
	}
	defer t.release()
	// A commit or abort may have ended the transaction while we waited
	// for the previous request: the offsets must not go into the next.
	t.mu.Lock()
	if t.state != txnInTransaction || t.gen.Load() != gen {
		err := t.stateErrLocked("SendOffsetsToTransaction")
		if t.gen.Load() != gen {
			err = fmt.Errorf("%w: SendOffsetsToTransaction: the transaction it was called in ended meanwhile; the offsets were not sent", kerr.ErrTransactionState)
		}
		t.mu.Unlock()
		return err
	}
	t.mu.Unlock()
	if err := t.sendOffsets(ctx, offsets, group); err != nil {
		err = t.recoverFenced(ctx, "SendOffsetsToTransaction", err)
		if !errorsIsFatal(err) && !errorsIsAbortable(err) {
			err = fmt.Errorf("%w: SendOffsetsToTransaction did not finish, so the offsets may or may not be in the transaction: %w", kerr.ErrTransactionAbortable, err)
		}
		t.fail(err)
		return fmt.Errorf("SendOffsetsToTransaction: %w", err)
	}
	return nil
}

// CommitTransaction sends every record of the transaction (Flush, linger
// ignored), waits for their acknowledgements, then commits the
// transaction with EndTxn: once it returns nil, read_committed consumers
// see all of its records and its offsets, atomically.
//
// If a record of the transaction failed, the commit is not attempted: it
// returns an error wrapping ErrTransactionAbortable; call
// AbortTransaction. ErrFatal (ErrProducerFenced) means the transaction did
// not commit and the producer must be closed. If ctx ends first, the
// outcome is not known yet: call CommitTransaction again (or, if its
// EndTxn was not sent yet, AbortTransaction). The call again takes the
// answer to the EndTxn already sent, if one came, as Java's does; only
// if that answer was lost (its connection failed) is EndTxn sent again,
// and then a producer fenced meanwhile by a newer one learns only that
// it is fenced, not whether the commit had gone through.
func (p *Producer) CommitTransaction(ctx context.Context) (err error) {
	defer timeCall(&p.metrics.txnCommitNs, time.Now(), &err)
	t, err := p.txnOrErr("CommitTransaction")
	if err != nil {
		return err
	}
	if err := p.refuseInCallback("CommitTransaction", "the callbacks of the transaction's records"); err != nil {
		return err
	}
	t.commits.Add(1)
	defer t.commits.Add(-1)
	if p.closed.Load() {
		// Close may have looked for running commits before this one
		// counted itself: it may be aborting the transaction.
		return fmt.Errorf("CommitTransaction: %w", kerr.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.MaxBlock)
	defer cancel()
	// A Send of the transaction waiting for buffer memory holds appendMu
	// for reading up to its max.block.ms; the commit waits for its record,
	// but no longer than its own ctx.
	if err := t.appendMu.Lock(ctx); err != nil {
		return fmt.Errorf("CommitTransaction: %w: a Send of the transaction is waiting for buffer memory (%w), and the commit waits for its record; the transaction is still open: call CommitTransaction or AbortTransaction again", kerr.ErrTransactionTimeout, err)
	}
	t.mu.Lock()
	if t.state != txnInTransaction && t.state != txnCommitting {
		err := t.stateErrLocked("CommitTransaction")
		t.mu.Unlock()
		t.appendMu.Unlock()
		return err
	}
	t.state = txnCommitting
	gen := t.gen.Load()
	t.mu.Unlock()
	t.appendMu.Unlock()

	if err := p.flush(ctx); err != nil {
		return fmt.Errorf("CommitTransaction: %w; the transaction is still open: call CommitTransaction or AbortTransaction again", waitEnded(ctx, err))
	}
	return t.endCommit(ctx, gen)
}

// endCommit is the end of CommitTransaction once its records are
// delivered: EndTxn(commit) for transaction gen, or the answer to the one
// already sent. Close calls it too, for a commit cut short after its
// EndTxn was sent.
func (t *txnManager) endCommit(ctx context.Context, gen uint64) error {
	if err := t.acquire(ctx); err != nil {
		return cutShort(ctx, "CommitTransaction", err)
	}
	defer t.release()
	t.mu.Lock()
	if over, err := t.endedLocked(gen, "CommitTransaction", true); over {
		t.mu.Unlock()
		return err
	}
	if t.state != txnCommitting { // a record failed: abortable, or fatal
		err := t.stateErrLocked("CommitTransaction")
		t.mu.Unlock()
		return err
	}
	started := t.started
	t.endSent = started
	t.mu.Unlock()
	if started {
		if err := t.endTxn(ctx, true); err != nil {
			err = t.recoverFenced(ctx, "EndTxn(commit)", err)
			t.fail(err)
			if !errorsIsFatal(err) && !errorsIsAbortable(err) {
				return cutShort(ctx, "CommitTransaction", err)
			}
			return fmt.Errorf("CommitTransaction: %w", err)
		}
	}
	t.complete(true)
	return nil
}

// AbortTransaction aborts the transaction: records not yet sent fail with
// ErrTransactionAborted, those in flight are waited for, and EndTxn(abort)
// tells the coordinator, which writes abort markers: read_committed
// consumers never see the transaction's records or offsets. Afterwards a
// new transaction can begin. It is the way out of an abortable error
// (ErrTransactionAbortable). If ctx ends first, call it again.
func (p *Producer) AbortTransaction(ctx context.Context) (err error) {
	defer timeCall(&p.metrics.txnAbortNs, time.Now(), &err)
	t, err := p.txnOrErr("AbortTransaction")
	if err != nil {
		return err
	}
	if err := p.refuseInCallback("AbortTransaction", "the callbacks of the records in flight"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.MaxBlock)
	defer cancel()
	gen, err := t.beginAbort()
	if err != nil {
		return err
	}
	return t.abort(ctx, gen)
}

// beginAbort moves to txnAborting and returns the transaction it aborts.
func (t *txnManager) beginAbort() (uint64, error) {
	// A Send of the transaction waiting for memory holds appendMu for
	// reading until it gets some, which in an outage only this abort
	// frees: such Sends stop waiting (their records fail, as the
	// transaction's unsent records do), so the abort takes appendMu at
	// once. (Java's abort does not wait for its senders either.)
	t.p.pool.refuseWaits(fmt.Errorf("%w: AbortTransaction was called while the record waited for buffer memory; send it again in the next transaction", kerr.ErrTransactionAborted))
	_ = t.appendMu.Lock(context.Background()) // at once: the waits for memory failed
	t.p.pool.allowWaits()
	defer t.appendMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.state == txnInTransaction, t.state == txnAbortable, t.state == txnAborting:
	case t.state == txnCommitting && !t.endSent:
		// The commit's flush did not finish: nothing was decided yet.
	case t.state == txnCommitting:
		return 0, fmt.Errorf("%w: AbortTransaction after CommitTransaction sent EndTxn: the outcome is decided; call CommitTransaction again to learn it", kerr.ErrTransactionState)
	default:
		return 0, t.stateErrLocked("AbortTransaction")
	}
	t.state = txnAborting
	t.p.snd.wake() // the sender fails what is not sent yet
	return t.gen.Load(), nil
}

// abort aborts transaction gen, which beginAbort began to abort.
func (t *txnManager) abort(ctx context.Context, gen uint64) error {
	p := t.p
	for _, ch := range p.acc.snapshotIncomplete() {
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("AbortTransaction: waiting for the records in flight: %w; call AbortTransaction again", waitEnded(ctx, ctx.Err()))
		}
	}
	if err := t.acquire(ctx); err != nil {
		return cutShort(ctx, "AbortTransaction", err)
	}
	defer t.release()
	t.mu.Lock()
	if over, err := t.endedLocked(gen, "AbortTransaction", false); over {
		t.mu.Unlock()
		return err
	}
	if t.state == txnFatal {
		err := t.err
		t.mu.Unlock()
		return err
	}
	started, maybeStarted, bump, v2, done := t.started, t.maybeStarted, t.bump, t.v2, t.aborted
	// The coordinator does not know our producer id any more: EndTxn
	// cannot succeed, and only InitProducerId (which then hands out a new
	// id) lets the next transaction begin, as in Java.
	lostID := bump && errorsIsCode(t.err, kerr.InvalidProducerIDMapping.Code)
	t.mu.Unlock()
	// v2 can end an empty transaction, and EndTxn bumps the epoch there:
	// the bump a failed batch needs.
	// v1: an add whose answer never came may have started the
	// transaction at the coordinator, or may still reach it. EndTxn can
	// tell neither: the epoch is bumped instead (InitProducerId below),
	// which aborts a transaction the coordinator has open and fences a
	// late add (Java retries the add, then sends EndTxn, and is exposed to
	// the late one).
	unsure := !v2 && maybeStarted && !started
	if !done && (started || (v2 && bump)) && !lostID {
		if err := t.endTxn(ctx, false); err != nil {
			err = t.recoverFenced(ctx, "EndTxn(abort)", err)
			t.mu.Lock()
			done = t.aborted // recovered: the coordinator had aborted it already
			t.mu.Unlock()
			switch {
			case done:
			case errorsIsCode(err, kerr.UnknownProducerID.Code), errorsIsCode(err, kerr.InvalidProducerIDMapping.Code):
				lostID = true
			default:
				t.fail(err)
				if errorsIsAbortable(err) {
					return fmt.Errorf("AbortTransaction: %w; call AbortTransaction again", err)
				}
				if !errorsIsFatal(err) {
					return cutShort(ctx, "AbortTransaction", err)
				}
				return fmt.Errorf("AbortTransaction: %w", err)
			}
		}
	}
	if !done && (lostID || ((bump || unsure) && !v2)) {
		t.mu.Lock()
		pid, epoch := t.pid, t.epoch
		t.mu.Unlock()
		npid, nepoch, err := t.initProducerID(ctx, pid, epoch)
		if err != nil {
			t.fail(err)
			if !errorsIsFatal(err) {
				return cutShort(ctx, "AbortTransaction (bumping the epoch)", err)
			}
			return fmt.Errorf("AbortTransaction: bumping the epoch: %w", err)
		}
		t.mu.Lock()
		t.pid, t.epoch = npid, nepoch
		t.idGen++
		t.mu.Unlock()
	}
	t.complete(false)
	return nil
}

// complete ends the transaction after a successful EndTxn (or none
// needed): the producer is ready for the next one.
func (t *txnManager) complete(commit bool) {
	how := "aborted"
	if commit {
		how = "committed"
	}
	t.mu.Lock()
	t.state, t.err = txnReady, nil
	gen, pid, epoch := t.gen.Load(), t.pid, t.epoch
	t.ended, t.endedCommitted = gen, commit
	t.mu.Unlock()
	t.p.log.Debug("transaction "+how, "transactional_id", t.id, "transaction", gen, "producer_id", pid, "epoch", epoch)
	t.p.snd.wake()
}

// endedLocked says whether transaction gen, which op (a commit or an
// abort) waited to end, was ended meanwhile by another call, and if so
// what op returns: nil if it ended the way op would have, else an
// ErrTransactionState saying how it ended. t.mu is held.
func (t *txnManager) endedLocked(gen uint64, op string, commit bool) (bool, error) {
	switch {
	case t.ended < gen:
		return false, nil
	case t.ended > gen:
		return true, fmt.Errorf("%w: %s: another call ended the transaction meanwhile, and the next one too", kerr.ErrTransactionState, op)
	case t.endedCommitted == commit:
		return true, nil
	case commit:
		return true, fmt.Errorf("%w: %s: a concurrent AbortTransaction aborted the transaction", kerr.ErrTransactionState, op)
	default:
		return true, fmt.Errorf("%w: %s: a concurrent CommitTransaction committed the transaction", kerr.ErrTransactionState, op)
	}
}

// fail moves to the error state err belongs to: fatal for errors wrapping
// ErrFatal, abortable for those wrapping ErrTransactionAbortable (unless
// the transaction is being aborted already). Others change nothing.
func (t *txnManager) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failLocked(err)
}

func (t *txnManager) failLocked(err error) {
	switch {
	case t.state == txnFatal:
	case errorsIsFatal(err):
		t.state, t.err = txnFatal, err
		t.p.log.Error("transactional producer failed fatally", "transactional_id", t.id, "err", err)
	case errorsIsAbortable(err):
		switch t.state {
		case txnInTransaction, txnCommitting:
			t.state, t.err = txnAbortable, err
			t.p.log.Info("transaction must be aborted", "transactional_id", t.id, "err", err)
		}
	default:
		return
	}
	t.p.snd.wake()
}

// closeAbort is Close's abort of a transaction left open, as the Java
// client's close does: best effort, within ctx.
func (t *txnManager) closeAbort(ctx context.Context) {
	// A CommitTransaction under way finishes first (within Close's ctx;
	// it is itself bounded by max.block.ms), as Java's close lets pending
	// transactional requests complete: aborting under it would report
	// its records delivered in a transaction that was then aborted.
	for t.commits.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.mu.Lock()
	open := t.state == txnInTransaction || t.state == txnAbortable || t.state == txnAborting ||
		(t.state == txnCommitting && !t.endSent)
	commitSent := t.state == txnCommitting && t.endSent
	gen := t.gen.Load()
	t.mu.Unlock()
	if commitSent {
		// A CommitTransaction cut short after it sent EndTxn(commit):
		// the commit is decided, and only an answer ends it. Java's
		// close completes the pending EndTxn too; left alone, the
		// transaction would hold read_committed consumers back until
		// transaction.timeout.ms, then be aborted.
		if err := t.endCommit(ctx, gen); err != nil {
			t.p.log.Warn("close: the commit sent before Close got no answer; the coordinator completes or aborts the transaction", "transactional_id", t.id, "err", err)
		}
		return
	}
	if !open {
		return
	}
	gen, err := t.beginAbort()
	if err != nil {
		return
	}
	if err := t.abort(ctx, gen); err != nil {
		t.p.log.Warn("close: could not abort the open transaction; the coordinator aborts it after transaction.timeout.ms", "transactional_id", t.id, "err", err)
	}
}
