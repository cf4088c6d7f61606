package kprod

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kprod/kprod/internal/broker"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The requests a transactional producer sends to coordinators, and how
// their answers are classified (Java's TxnRequestHandler subclasses).

const (
	coordGroup int8 = 0 // FindCoordinator key types
	coordTxn   int8 = 1

	// concurrentTxnBackoff is the first backoff after
	// CONCURRENT_TRANSACTIONS: the previous transaction's markers are
	// usually written within milliseconds, and a new transaction waits
	// for them (Java's ADD_PARTITIONS_RETRY_BACKOFF_MS).
	concurrentTxnBackoff = 20 * time.Millisecond
)

// txnStep is what to do after one coordinator response.
type txnStep int8

const (
	stepDone      txnStep = iota
	stepRefind            // the coordinator moved or is not available: find it again, retry
	stepRetry             // retriable (loading, ...): retry after backoff
	stepRetrySoon         // CONCURRENT_TRANSACTIONS: retry after a short backoff
	stepFail              // give up with the error
)

// errAbandoned: the request is no longer wanted (the transaction is being
// aborted); not an error of the transaction.
var errAbandoned = errors.New("kprod: transactional request abandoned")

// capVersion caps the version of a request below what the connection
// negotiated: the connection sets the highest both sides support, and a
// transactions v1 client must stay below the versions that mean v2
// (KIP-890).
type capVersion struct {
	kmsg.Request
	max int16
}

func (c *capVersion) SetVersion(v int16) { c.Request.SetVersion(min(v, c.max)) }

func (t *txnManager) acquire(ctx context.Context) error {
	t.acquiring.Add(1)
	defer t.acquiring.Add(-1)
	select {
	case t.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the transaction's previous request: %w", ctx.Err())
	}
}

func (t *txnManager) release() { <-t.sem }

func errorsIsFatal(err error) bool     { return errors.Is(err, kerr.ErrFatal) }
func errorsIsAbortable(err error) bool { return errors.Is(err, kerr.ErrTransactionAbortable) }

func errorsIsCode(err error, code int16) bool {
	var be *kerr.BrokerError
	return errors.As(err, &be) && be.Code == code
}

func isAuthorization(err error) bool {
	return errorsIsCode(err, kerr.TransactionalIDAuthorizationFailed.Code) || errorsIsCode(err, kerr.ClusterAuthorizationFailed.Code)
}

// fatalErr wraps a coordinator's answer into the producer's fatal error.
func (t *txnManager) fatalErr(op string, err error) error {
	return fmt.Errorf("%w: transactional.id %q: %s: %w", kerr.ErrFatal, t.id, op, err)
}

// fencedErr is the fatal error of PRODUCER_FENCED or INVALID_PRODUCER_EPOCH
// from a coordinator. The coordinator's abort of a transaction that
// outlived transaction.timeout.ms also bumps the epoch, and the broker
// answers then exactly as if another producer had taken over: the callers
// that can tell the two apart try recoverFenced first.
func (t *txnManager) fencedErr(op string, err error) error {
	t.mu.Lock()
	pid, epoch := t.pid, t.epoch
	t.mu.Unlock()
	return fmt.Errorf("%w (%w): transactional.id %q, producer id %d, epoch %d: %s: a newer producer with the same transactional.id called InitTransactions: %w",
		kerr.ErrProducerFenced, kerr.ErrFatal, t.id, pid, epoch, op, err)
}

func abortableErr(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", kerr.ErrTransactionAbortable, op, err)
}

// recoverFenced asks the coordinator, after it (or a partition leader)
// answered that our epoch is fenced, whether another producer took over
// or it only aborted our transaction itself because it outlived
// transaction.timeout.ms: InitProducerId with our producer id and epoch
// (KIP-360, as KIP-588 meant for timeouts). The coordinator accepts that
// epoch only if it is its current or its last one, which a newer
// producer's InitProducerId makes impossible, so this never revives a
// fenced producer. If it is accepted, the transaction is aborted (by the
// timeout, or now, by this very request) and the producer holds the
// current epoch: the error becomes abortable, and AbortTransaction has
// nothing left to do but return. Otherwise err is returned as it is. The
// caller holds sem.
func (t *txnManager) recoverFenced(ctx context.Context, op string, err error) error {
	if !errors.Is(err, kerr.ErrProducerFenced) {
		return err
	}
	t.mu.Lock()
	pid, epoch, begun := t.pid, t.epoch, t.begun
	t.mu.Unlock()
	npid, nepoch, ierr := t.initProducerID(ctx, pid, epoch)
	if ierr != nil && ctx.Err() != nil && !errorsIsFatal(ierr) && !errors.Is(ierr, kerr.ErrProducerFenced) {
		// Cut short before the coordinator could tell its own abort from
		// a newer producer: not fatal yet. The caller reports its call
		// cut short; called again, it asks again.
		return fmt.Errorf("%s was refused as fenced (%v), and the InitProducerId that tells the coordinator's own abort of the transaction from a newer producer did not finish: %w", op, err, ierr)
	}
	if ierr != nil {
		t.p.log.Debug("fenced: InitProducerId with our epoch refused too", "transactional_id", t.id, "err", ierr)
		return err
	}
	why := "the transaction coordinator aborted the transaction"
	if timeout := t.p.cfg.TransactionTimeout; !begun.IsZero() && time.Since(begun) >= timeout {
		why = fmt.Sprintf("%s: it was open for %v, longer than transaction.timeout.ms (%v)", why, time.Since(begun).Round(time.Millisecond), timeout)
	}
	aerr := fmt.Errorf("%w: %s: %s; none of its records or offsets are visible to read_committed consumers; call AbortTransaction, then go on", kerr.ErrTransactionAbortable, op, why)
	t.mu.Lock()
	t.pid, t.epoch, t.aborted = npid, nepoch, true
	t.idGen++
	// Abortable in the same step: the sender adopts the new epoch as
	// soon as it sees idGen change, and must not send this transaction's
	// batches under it, which would open a transaction of their own.
	t.failLocked(aerr)
	t.mu.Unlock()
	t.p.log.Info("transaction aborted by its coordinator; producer epoch recovered", "transactional_id", t.id, "producer_id", npid, "epoch", nepoch, "old_epoch", epoch)
	return aerr
}

// classify is the common handling of a transaction coordinator's error
// code (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn).
// bump is set for the errors after which an abort must bump the epoch.
func (t *txnManager) classify(op string, code int16, msg *string) (txnStep, error) {
	if code == 0 {
		return stepDone, nil
	}
	be := kerr.ForCode(code).(*kerr.BrokerError)
	var err error = be
	if msg != nil && *msg != "" {
		err = &kerr.ResponseError{Err: be, Message: *msg, Broker: -1}
	}
	switch be.Code {
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code:
		return stepRefind, err
	case kerr.ConcurrentTransactions.Code:
		return stepRetrySoon, err
	case kerr.InvalidProducerEpoch.Code, kerr.ProducerFenced.Code:
		// Older coordinators answer INVALID_PRODUCER_EPOCH where newer
		// ones say PRODUCER_FENCED; both mean fenced here.
		return stepFail, t.fencedErr(op, err)
	case kerr.TransactionalIDAuthorizationFailed.Code, kerr.InvalidTxnState.Code:
		return stepFail, t.fatalErr(op, err)
	case kerr.UnknownProducerID.Code, kerr.InvalidProducerIDMapping.Code:
		// The coordinator lost (or expired) our producer id: abort, which
		// gets a new epoch (KIP-360).
		t.mu.Lock()
		t.bump = true
		t.mu.Unlock()
		return stepFail, abortableErr(op, err)
	case kerr.TransactionAbortable.Code:
		return stepFail, abortableErr(op, err)
	}
	if be.Retriable {
		return stepRetry, err
	}
	return stepFail, t.fatalErr(op+" (unexpected error)", err)
}

// call sends a request to the coordinator of (kind, key) and retries, with
// backoff, what handle says is retriable, until handle says done or fail,
// or ctx ends. build makes the request for each attempt; it returns nil
// when the request is no longer wanted (call then returns errAbandoned).
// The caller holds sem.
func (t *txnManager) call(ctx context.Context, kind int8, key, op string, build func() kmsg.Request, handle func(kmsg.Response) (txnStep, error)) error {
	p := t.p
	var lastErr error
	soon := false
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			backoff := broker.Backoff(p.cfg.RetryBackoff, p.cfg.RetryBackoffMax, attempt-1)
			if soon {
				backoff = broker.Backoff(min(concurrentTxnBackoff, p.cfg.RetryBackoff), p.cfg.RetryBackoffMax, attempt-1)
			}
			p.log.Debug("retrying transactional request", "request", op, "attempt", attempt, "backoff", backoff, "err", lastErr)
			timer := time.NewTimer(backoff)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return fmt.Errorf("%s: %w (last error: %w)", op, ctx.Err(), lastErr)
			}
		}
		if isClosed(p.snd.done) {
			return fmt.Errorf("%s: %w", op, kerr.ErrClosed)
		}
		req := build()
		if req == nil {
			return errAbandoned
		}
		br, step, err := t.coordinator(ctx, kind, key)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w (last error: %w)", op, ctx.Err(), err)
			}
			if step == stepFail {
				return err
			}
			lastErr, soon = err, false
			continue
		}
		prev, err := t.awaitLate(ctx, op)
		if err != nil {
			return fmt.Errorf("%s: %w (waiting for the answer to an earlier request that was cut short, so as not to overtake it)", op, err)
		}
		var resp kmsg.Response
		if prev != nil {
			resp = prev // this very request, sent before: its answer is ours
		} else {
			var late <-chan broker.Late
			resp, late, err = br.DoTracked(ctx, req)
			if late != nil {
				t.late, t.lateOp, t.lateGen = late, op, t.gen.Load()
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w (last error: %w)", op, ctx.Err(), err)
			}
			if errors.Is(err, kerr.ErrUnsupportedVersion) {
				return t.fatalErr(op, err)
			}
			// A broken connection, a timeout, a coordinator that is gone:
			// find it again (Java retries a disconnected transactional
			// request the same way; coordinator requests are safe to
			// repeat).
			t.forget(kind, key)
			lastErr, soon = err, false
			continue
		}
		step, err = handle(resp)
		switch step {
		case stepDone:
			return nil
		case stepFail:
			return err
		case stepRefind:
			t.forget(kind, key)
		}
		lastErr, soon = err, step == stepRetrySoon
	}
}

// awaitLate waits until the last request given up on while on the wire is
// over (answered, timed out, or failed with its connection), so that the
// next one cannot overtake it: the Java client, too, sends one
// transactional request at a time, the next after the previous one's
// response. Otherwise an abort's EndTxn could reach the transaction
// coordinator before a TxnOffsetCommit that SendOffsetsToTransaction gave
// up on reaches the group coordinator, another broker; with transactions
// v1 (no new epoch per transaction) a broker that does not verify the
// transaction (KIP-890) could then keep those offsets pending into the
// producer's next transaction. The caller holds sem.
//
// If the request given up on was op itself, in the same transaction, and
// it was answered, awaitLate returns that answer for the caller to take
// as its own. Only EndTxn is taken so: an answer to a commit or an abort
// that went through is the outcome the retry is after.
func (t *txnManager) awaitLate(ctx context.Context, op string) (kmsg.Response, error) {
	if t.late == nil {
		return nil, nil
	}
	select {
	case l := <-t.late:
		t.late = nil
		if l.Err == nil && l.Resp != nil && op == t.lateOp && t.lateGen == t.gen.Load() && strings.HasPrefix(op, "EndTxn") {
			t.p.log.Debug("taking the answer to a request given up on earlier as the retry's", "request", op)
			return l.Resp, nil
		}
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// coordinator returns the coordinator broker of (kind, key), finding it
// with FindCoordinator at the least loaded broker if not known.
func (t *txnManager) coordinator(ctx context.Context, kind int8, key string) (*broker.Broker, txnStep, error) {
	p := t.p
	t.mu.Lock()
	id, ok := t.coord, t.coord >= 0
	if kind == coordGroup {
		id, ok = t.groups[key]
	}
	t.mu.Unlock()
	if !ok {
		br := p.cl.LeastLoaded()
		if br == nil {
			p.cl.RequestRefresh()
			return nil, stepRetry, fmt.Errorf("%w: FindCoordinator: no broker known yet; is the cluster reachable (bootstrap.servers)?", kerr.ErrMetadataTimeout)
		}
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorType, req.CoordinatorKeys = key, kind, []string{key}
		resp, err := br.Do(ctx, req)
		if err != nil {
			return nil, stepRetry, fmt.Errorf("FindCoordinator: %w", err)
		}
		r := resp.(*kmsg.FindCoordinatorResponse)
		code, msg, node := r.ErrorCode, r.ErrorMessage, r.NodeID
		if r.Version >= 4 {
			if len(r.Coordinators) != 1 {
				return nil, stepRetry, fmt.Errorf("FindCoordinator: %d coordinators in the response, want 1", len(r.Coordinators))
			}
			c := r.Coordinators[0]
			code, msg, node = c.ErrorCode, c.ErrorMessage, c.NodeID
		}
		if code != 0 {
			be := kerr.ForCode(code).(*kerr.BrokerError)
			var err error = be
			if msg != nil && *msg != "" {
				err = &kerr.ResponseError{Err: be, Message: *msg, Broker: br.ID()}
			}
			switch {
			case be.Retriable:
				return nil, stepRetry, fmt.Errorf("FindCoordinator: %w", err)
			case be.Code == kerr.GroupAuthorizationFailed.Code:
				return nil, stepFail, abortableErr(fmt.Sprintf("FindCoordinator for group %q", key), err)
			case be.Code == kerr.TransactionAbortable.Code:
				return nil, stepFail, abortableErr("FindCoordinator", err)
			}
			return nil, stepFail, t.fatalErr("FindCoordinator", err)
		}
		id = node
		t.mu.Lock()
		if kind == coordGroup {
			t.groups[key] = id
		} else {
			t.coord = id
		}
		t.mu.Unlock()
		p.log.Debug("found coordinator", "type", kind, "key", key, "node", id)
	}
	br := p.cl.Broker(id)
	if br == nil {
		// Metadata does not list it yet (a broker that just joined).
		p.cl.RequestRefresh()
		t.forget(kind, key)
		return nil, stepRetry, fmt.Errorf("%w: the transaction coordinator, broker %d, is not in the cluster metadata yet", kerr.ErrMetadataTimeout, id)
	}
	return br, stepDone, nil
}

func (t *txnManager) forget(kind int8, key string) {
	t.mu.Lock()
	if kind == coordGroup {
		delete(t.groups, key)
	} else {
		t.coord = -1
	}
	t.mu.Unlock()
}

// detectV2 reports whether transactions v2 can be used: the coordinator's
// finalized feature transaction.version is 2 or more, and it speaks
// Produce v12+ and EndTxn v5+ with us. ApiVersions is asked again on the
// coordinator's connection, because the connection keeps only the
// negotiated versions of its handshake.
func (t *txnManager) detectV2(ctx context.Context) (v2 bool, err error) {
	if t.forceV1 {
		return false, nil
	}
	err = t.call(ctx, coordTxn, t.id, "ApiVersions", func() kmsg.Request {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName = "kprod"
		req.ClientSoftwareVersion = broker.Version
		return req
	}, func(resp kmsg.Response) (txnStep, error) {
		r := resp.(*kmsg.ApiVersionsResponse)
		if r.ErrorCode != 0 {
			return stepRetry, kerr.ForCode(r.ErrorCode)
		}
		level, produce, endTxn := int16(0), int16(-1), int16(-1)
		for _, f := range r.FinalizedFeatures {
			if f.Name == "transaction.version" {
				level = f.MaxVersionLevel
			}
		}
		for _, k := range r.ApiKeys {
			switch k.ApiKey {
			case 0:
				produce = k.MaxVersion
			case 26:
				endTxn = k.MaxVersion
			}
		}
		v2 = level >= 2 && produce >= 12 && endTxn >= 5
		return stepDone, nil
	})
	return v2, err
}

// initProducerID sends InitProducerId with the transactional id: with pid
// -1 for a new producer (fencing older ones), or with the current id and
// epoch to bump the epoch (KIP-360).
func (t *txnManager) initProducerID(ctx context.Context, pid int64, epoch int16) (int64, int16, error) {
	var npid int64
	var nepoch int16
	op := "InitProducerId"
	err := t.call(ctx, coordTxn, t.id, op, func() kmsg.Request {
		req := kmsg.NewPtrInitProducerIDRequest()
		id := t.id
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = int32(t.p.cfg.TransactionTimeout / time.Millisecond)
		req.ProducerID, req.ProducerEpoch = pid, epoch
		return req
	}, func(resp kmsg.Response) (txnStep, error) {
		r := resp.(*kmsg.InitProducerIDResponse)
		switch r.ErrorCode {
		case 0:
			if pid >= 0 && r.Version < 3 {
				// A coordinator older than KIP-360 ignores our id and
				// epoch: the epoch bump is not possible.
				return stepFail, t.fatalErr(op, errors.New("the coordinator does not support bumping the epoch (InitProducerId v3, Kafka 2.5)"))
			}
			npid, nepoch = r.ProducerID, r.ProducerEpoch
			return stepDone, nil
		case kerr.InvalidTransactionTimeout.Code:
			return stepFail, t.fatalErr(op, fmt.Errorf("%w: transaction.timeout.ms %v is above the brokers' transaction.max.timeout.ms (default 15 minutes): lower it",
				kerr.InvalidTransactionTimeout, t.p.cfg.TransactionTimeout))
		case kerr.TransactionalIDAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code:
			return stepFail, fmt.Errorf("%s: %w: does the principal have WRITE on transactional id %q?", op, kerr.ForCode(r.ErrorCode), t.id)
		}
		return t.classify(op, r.ErrorCode, nil)
	})
	return npid, nepoch, err
}

// endTxn commits or aborts the transaction at the coordinator. With
// transactions v2 the response carries the next epoch (or a new producer
// id when the epoch is exhausted), which the sender adopts.
func (t *txnManager) endTxn(ctx context.Context, commit bool) error {
	op := "EndTxn(abort)"
	if commit {
		op = "EndTxn(commit)"
	}
	t.mu.Lock()
	pid, epoch, v2 := t.pid, t.epoch, t.v2
	t.mu.Unlock()
	return t.call(ctx, coordTxn, t.id, op, func() kmsg.Request {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = t.id, pid, epoch, commit
		if !v2 {
			return &capVersion{req, 4} // v5 means "bump the epoch" (KIP-890)
		}
		return req
	}, func(resp kmsg.Response) (txnStep, error) {
		r := resp.(*kmsg.EndTxnResponse)
		if commit && v2 && r.ErrorCode == kerr.InvalidTxnState.Code {
			// A v2 coordinator that aborted our transaction on
			// transaction.timeout.ms bumped the epoch by one, and takes
			// our EndTxn for a retry of one that ended the transaction
			// (KIP-890): the transaction it ended was aborted, so a
			// commit is invalid. EndTxn(abort) is then accepted the
			// same way, and returns the current epoch: abortable.
			t.mu.Lock()
			begun := t.begun
			t.mu.Unlock()
			why := "the transaction coordinator aborted the transaction"
			if timeout := t.p.cfg.TransactionTimeout; !begun.IsZero() && time.Since(begun) >= timeout {
				why = fmt.Sprintf("%s: it was open for %v, longer than transaction.timeout.ms (%v)", why, time.Since(begun).Round(time.Millisecond), timeout)
			}
			return stepFail, fmt.Errorf("%w: %s: %s; none of its records or offsets are visible to read_committed consumers; call AbortTransaction, then go on: %w",
				kerr.ErrTransactionAbortable, op, why, kerr.InvalidTxnState)
		}
		step, err := t.classify(op, r.ErrorCode, nil)
		if step == stepDone && v2 && r.Version >= 5 && r.ProducerID >= 0 {
			t.mu.Lock()
			t.pid, t.epoch = r.ProducerID, r.ProducerEpoch
			t.idGen++
			t.mu.Unlock()
		}
		return step, err
	})
}

// addPartitions adds partitions to the transaction (v1). On success they
// are marked added in transaction gen; build abandons the request if the
// transaction no longer wants it.
func (t *txnManager) addPartitions(ctx context.Context, parts []*partq, gen uint64) error {
	op := "AddPartitionsToTxn"
	byTopic := map[string][]int32{}
	for _, q := range parts {
		byTopic[q.topic.name] = append(byTopic[q.topic.name], q.partition)
	}
	topics := make([]string, 0, len(byTopic))
	for name := range byTopic {
		topics = append(topics, name)
	}
	sort.Strings(topics)
	err := t.call(ctx, coordTxn, t.id, op, func() kmsg.Request {
		t.mu.Lock()
		wanted := t.gen.Load() == gen && (t.state == txnInTransaction || t.state == txnCommitting)
		pid, epoch := t.pid, t.epoch
		t.mu.Unlock()
		if !wanted {
			return nil
		}
		t.addSent()
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = t.id, pid, epoch
		for _, name := range topics {
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic, rt.Partitions = name, byTopic[name]
			req.Topics = append(req.Topics, rt)
		}
		return &capVersion{req, 3} // v4+ is the brokers' batched form
	}, func(resp kmsg.Response) (txnStep, error) {
		r := resp.(*kmsg.AddPartitionsToTxnResponse)
		var perr error
		unauthorized, failed := 0, 0
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode == 0 {
					continue
				}
				switch rp.ErrorCode {
				case kerr.TopicAuthorizationFailed.Code:
					unauthorized++
					perr = &kerr.ResponseError{Err: kerr.ForCode(rp.ErrorCode).(*kerr.BrokerError), Broker: -1, Topic: rt.Topic, Partition: rp.Partition}
					continue
				case kerr.OperationNotAttempted.Code:
					failed++ // another partition of the request failed
					if perr == nil {
						perr = kerr.OperationNotAttempted // replaced by that partition's error, if it comes
					}
					continue
				}
				if be := kerr.ForCode(rp.ErrorCode).(*kerr.BrokerError); !be.Retriable && !txnCoordinatorCode(be.Code) {
					// Any other error: the partition cannot join the
					// transaction (Java: abortable).
					failed++
					perr = &kerr.ResponseError{Err: be, Broker: -1, Topic: rt.Topic, Partition: rp.Partition}
					continue
				}
				// Retriable (the whole request again), fenced, fatal or
				// abortable.
				return t.classify(op, rp.ErrorCode, nil)
			}
		}
		if unauthorized > 0 || failed > 0 {
			return stepFail, abortableErr(fmt.Sprintf("%s: %d partitions not authorized, %d not added", op, unauthorized, failed), perr)
		}
		t.mu.Lock()
		if !t.started {
			t.started, t.begun = true, time.Now()
		}
		t.mu.Unlock()
		for _, q := range parts {
			q.txnGen.Store(gen)
		}
		return stepDone, nil
	})
	return err
}

// addSent notes that an AddPartitionsToTxn or AddOffsetsToTxn is about to
// go out: it may reach the coordinator whatever we hear back (see
// txnManager.maybeStarted).
func (t *txnManager) addSent() {
	t.mu.Lock()
	t.maybeStarted = true
	t.mu.Unlock()
}

// txnCoordinatorCode: the non-retriable codes classify knows.
func txnCoordinatorCode(code int16) bool {
	switch code {
	case kerr.InvalidProducerEpoch.Code, kerr.ProducerFenced.Code, kerr.TransactionalIDAuthorizationFailed.Code,
		kerr.InvalidTxnState.Code, kerr.UnknownProducerID.Code, kerr.InvalidProducerIDMapping.Code, kerr.TransactionAbortable.Code:
		return true
	}
	return false
}

// sendOffsets is SendOffsetsToTransaction's requests: AddOffsetsToTxn (v1
// only), then TxnOffsetCommit at the group coordinator, retrying the
// partitions that failed with retriable errors (Java's
// TxnOffsetCommitHandler).
func (t *txnManager) sendOffsets(ctx context.Context, offsets map[string]map[int32]Offset, group GroupMetadata) error {
	t.mu.Lock()
	pid, epoch, v2 := t.pid, t.epoch, t.v2
	t.mu.Unlock()
	if !v2 {
		op := "AddOffsetsToTxn"
		err := t.call(ctx, coordTxn, t.id, op, func() kmsg.Request {
			t.addSent()
			req := kmsg.NewPtrAddOffsetsToTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = t.id, pid, epoch, group.GroupID
			return req
		}, func(resp kmsg.Response) (txnStep, error) {
			r := resp.(*kmsg.AddOffsetsToTxnResponse)
			if r.ErrorCode == kerr.GroupAuthorizationFailed.Code {
				return stepFail, abortableErr(fmt.Sprintf("%s for group %q", op, group.GroupID), kerr.GroupAuthorizationFailed)
			}
			return t.classify(op, r.ErrorCode, nil)
		})
		if err != nil {
			return err
		}
	}
	t.mu.Lock()
	if !t.started {
		// v2: TxnOffsetCommit v5 adds the group to the transaction itself.
		t.started, t.begun = true, time.Now()
	}
	t.mu.Unlock()

	pending := map[string]map[int32]Offset{}
	for topic, ps := range offsets {
		m := map[int32]Offset{}
		for part, o := range ps {
			m[part] = o
		}
		pending[topic] = m
	}
	op := "TxnOffsetCommit"
	maxV := int16(5) // v6 names topics by id (KIP-1319), which we may not know
	if !v2 {
		maxV = 4 // v5 means "add the group implicitly" (KIP-890)
	}
	return t.call(ctx, coordGroup, group.GroupID, op, func() kmsg.Request {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = t.id, group.GroupID, pid, epoch
		req.Generation, req.MemberID = group.GenerationID, group.MemberID
		if group.GroupInstanceID != "" {
			iid := group.GroupInstanceID
			req.InstanceID = &iid
		}
		topics := make([]string, 0, len(pending))
		for topic := range pending {
			topics = append(topics, topic)
		}
		sort.Strings(topics)
		for _, topic := range topics {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = topic
			for part, o := range pending[topic] {
				rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
				md := o.Metadata
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = part, o.Offset, o.LeaderEpoch, &md
				rt.Partitions = append(rt.Partitions, rp)
			}
			sort.Slice(rt.Partitions, func(i, j int) bool { return rt.Partitions[i].Partition < rt.Partitions[j].Partition })
			req.Topics = append(req.Topics, rt)
		}
		return &capVersion{req, maxV}
	}, func(resp kmsg.Response) (txnStep, error) {
		r := resp.(*kmsg.TxnOffsetCommitResponse)
		step, stepErr := stepDone, error(nil)
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode == 0 {
					delete(pending[rt.Topic], rp.Partition)
					if len(pending[rt.Topic]) == 0 {
						delete(pending, rt.Topic)
					}
					continue
				}
				be := kerr.ForCode(rp.ErrorCode).(*kerr.BrokerError)
				err := &kerr.ResponseError{Err: be, Broker: -1, Topic: rt.Topic, Partition: rp.Partition}
				switch be.Code {
				case kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code, kerr.RequestTimedOut.Code:
					step, stepErr = stepRefind, err
					continue
				case kerr.GroupAuthorizationFailed.Code, kerr.FencedInstanceID.Code, kerr.TransactionAbortable.Code:
					return stepFail, abortableErr(fmt.Sprintf("%s for group %q", op, group.GroupID), err)
				case kerr.UnknownMemberID.Code, kerr.IllegalGeneration.Code:
					return stepFail, abortableErr(fmt.Sprintf("%s for group %q: the group has moved on since the records were consumed (generation %d, member %q); abort, and process them again after the rebalance",
						op, group.GroupID, group.GenerationID, group.MemberID), err)
				case kerr.InvalidProducerEpoch.Code, kerr.ProducerFenced.Code:
					return stepFail, t.fencedErr(op, err)
				}
				if be.Retriable {
					if step != stepRefind {
						step, stepErr = stepRetry, err
					}
					continue
				}
				return stepFail, t.fatalErr(op, err)
			}
		}
		if step == stepDone && len(pending) > 0 {
			return stepRetry, fmt.Errorf("%s: %d topics not answered", op, len(pending))
		}
		return step, stepErr
	})
}
