package kprod

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kprod/kprod/internal/broker"
	"github.com/kprod/kprod/internal/cluster"
	"github.com/kprod/kprod/internal/live"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sender is the seeds' Sender: one goroutine that loops ready → drain →
// send → handle responses → expire. It is the only goroutine that takes
// batches out of the deques, puts them back, seals them and completes
// them, so batch delivery state needs no lock. It sleeps until the next
// linger or backoff deadline, or until woken: a new batch, a response, a
// connection made, new metadata, a flush or a close.
type sender struct {
	p *Producer

	wakeCh chan struct{} // cap 1

	resMu   sync.Mutex
	results []*produceResult // responses handed over by connection goroutines; guarded by resMu

	closing chan struct{} // Close: send everything, ignore linger, then stop
	force   chan struct{} // Close's ctx ended: fail what is left, then stop
	done    chan struct{} // closed when run returns

	// gid is the id of the goroutine run runs on, where callbacks run:
	// calls that wait for deliveries refuse to run there (onGoroutine).
	gid atomic.Uint64
	// inCallbacks is set while run's goroutine runs caller code that may
	// call Send, Flush or Close: records' callbacks (and with them the
	// interceptors' OnAcknowledgement), and the interceptors' and the
	// partitioner's Close when it finishes a Close made from a callback.
	// Outside them no caller is on that goroutine, and onGoroutine need
	// not read the goroutine's id, which costs a traceback.
	inCallbacks atomic.Bool
	// finishClose: Close was called from a callback and could not wait;
	// run finishes it (Producer.finishClose) on its way out.
	finishClose atomic.Bool

	forceCtx context.Context // cancelled with force, for requests the sender waits on
	// closingCtx is cancelled with closing (startClosing), for a request
	// that a Close with nothing to deliver need not wait for.
	closingCtx    context.Context
	closingCancel context.CancelFunc
	forceCancel   context.CancelFunc
	idemOn        bool        // enable.idempotence in effect
	idem          idempotence // producer id, epoch; sender-owned
	txn           txnSender   // transactional.id: the sender's side (transaction_sender.go)

	rotate int // partition to start draining from, so none starves
	// drainFirst: leader → index in the accumulator's parts of the first
	// partition whose batches waited in that leader's last request (left
	// out for max.request.size, or muted while its batch was in flight);
	// it goes first in the leader's next one, as Java's per-node drain
	// index resumes where the last drain stopped, so that a leader's
	// partitions take turns even when one batch fills a request. deferred
	// is sendReady's scratch list of the partitions it visits after it,
	// and lingering its list of those whose batch was not sendable yet.
	drainFirst map[int32]int
	deferred   []int
	lingering  []lingerer
	inflight   int                 // produce requests in flight
	throttled  map[int32]time.Time // broker → end of its throttle
	inFlightB  map[*batch]struct{} // batches in flight, for delivery.timeout.ms
	// inFlightNext is at or before the earliest delivery deadline in
	// inFlightB (set whenever inFlightB is not empty), so that
	// expireInFlight walks the map only once a deadline may have passed.
	inFlightNext time.Time
	// forcedFails counts the batches that failed once Close forced the
	// end: Close reports records aborted only when there were any.
	forcedFails int
}

// produceResult is one produce request's outcome, handed from the
// connection's reader goroutine to the sender.
type produceResult struct {
	broker  int32
	batches []*batch
	resp    kmsg.Response
	err     error
	sentAt  time.Time           // for request-latency
	doneAt  time.Time           // when the response (or failure) came, before any callback ran
	ids     map[[16]byte]string // topic id → name, as sent (Produce v13)
}

// topicIDs maps the ids of a request's topics to their names.
func topicIDs(topics map[string]*cluster.Topic) map[[16]byte]string {
	ids := make(map[[16]byte]string, len(topics))
	for name, mt := range topics {
		if mt != nil {
			ids[mt.ID] = name
		}
	}
	return ids
}

func newSender(p *Producer) *sender {
	ctx, cancel := context.WithCancel(context.Background())
	cctx, ccancel := context.WithCancel(context.Background())
	return &sender{
		p:             p,
		forceCtx:      ctx,
		forceCancel:   cancel,
		closingCtx:    cctx,
		closingCancel: ccancel,
		idemOn:        p.cfg.Idempotent(),
		txn:           txnSender{on: p.txn != nil},
		wakeCh:        make(chan struct{}, 1),
		closing:       make(chan struct{}),
		force:         make(chan struct{}),
		done:          make(chan struct{}),
		throttled:     map[int32]time.Time{},
		inFlightB:     map[*batch]struct{}{},
	}
}

func (s *sender) wake() {
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}

// startClosing tells the sender that Close has begun: deliver what is
// buffered, then stop.
func (s *sender) startClosing() {
	close(s.closing)
	s.closingCancel()
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (s *sender) run() {
	s.gid.Store(goroutineID())
	defer func() {
		if s.finishClose.Load() {
			// After done: Close from a callback did not wait. Other
			// Closes wait for closeDone, which this closes, so the
			// goroutine is uncounted just before. The interceptors'
			// and the partitioner's Close run here: caller code, which
			// may call Close again (onGoroutine).
			s.inCallbacks.Store(true)
			s.p.finishCloseThen(live.Done)
		}
	}()
	defer close(s.done)
	defer func() {
		if !s.finishClose.Load() {
			live.Done() // Close waits for done
		}
	}()
	defer s.txn.wg.Wait() // the AddPartitionsToTxn goroutine ends with forceCtx
	defer s.forceCancel()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.p.acc.recycle()
		s.handleResults()
		now := time.Now()
		closing, forced := isClosed(s.closing), isClosed(s.force)
		closingCh, forceCh := s.closing, s.force
		if closing {
			closingCh = nil // seen; do not spin on it
		}
		if forced {
			forceCh = nil // likewise: the results of what is in flight wake the loop
			buffered := func(b *batch) error {
				return fmt.Errorf("%w: %s[%d] was still buffered when the producer was closed", kerr.ErrAborted, b.q.topic.name, b.q.partition)
			}
			if s.inflight == 0 {
				s.abortQueued(buffered)
				s.unparkAll() // nothing older is left under way
				return
			}
			// Closing the connections fails what is in flight; those
			// results come back through handleResults. What is queued is
			// newer, but for retries waiting for their backoff: those go
			// first, the rest after, so that each partition's callbacks
			// keep their order.
			s.abortOlderQueued(buffered)
			s.p.cl.Close()
		} else {
			canDrain := true
			if s.txn.on {
				// The producer id comes from InitTransactions, not from
				// ensureProducerID.
				canDrain = s.txnPrepare()
			} else if s.idemOn {
				canDrain = s.ensureProducerID(now)
				if err := s.idem.fatal; err != nil {
					s.abortQueued(func(*batch) error { return err })
				}
			}
			// In-flight batches expire before the queued ones, which
			// are newer, so that a partition's callbacks keep their
			// order (sendReady expires what is queued).
			inflightNext := s.expireInFlight(now)
			next, sent := s.sendReady(now, closing, canDrain)
			if s.idemOn && (!canDrain || s.idem.bumpNeeded) && s.idem.retryAt.After(now) && (next.IsZero() || s.idem.retryAt.Before(next)) {
				next = s.idem.retryAt // InitProducerId again
			}
			if s.idemOn && s.idem.bumpNeeded && s.idem.have && s.idem.fatal == nil && !s.idem.retryAt.After(now) && s.bumpReady() {
				next = now // a partition asked for a bump during this round: bump on the next
			}
			if t := inflightNext; !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
			if closing && s.inflight == 0 && !s.p.acc.hasIncomplete() {
				return
			}
			if sent {
				continue // more may be sendable right away
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			if !next.IsZero() {
				timer.Reset(max(time.Until(next), 0))
			} else {
				timer.Reset(time.Hour)
			}
		}
		select {
		case <-s.wakeCh:
		case <-timer.C:
		case <-closingCh:
		case <-forceCh:
		}
	}
}

// sendReady is ready() and drain() in one pass: it walks every partition,
// starting from a rotating index, and collects, per leader that can take a
// request, the first batch of each partition that is sendable — full, or
// lingered long enough, or wanted now by a flush, a close or a sender
// blocked on memory — up to max.request.size; then, as Java's drain does
// for a ready node, the first batch of each of those leaders' partitions
// that was still lingering. It returns when it should
// run again at the latest and whether it sent anything.
func (s *sender) sendReady(now time.Time, closing, canDrain bool) (next time.Time, sent bool) {
	p := s.p
	snap := p.cl.Snapshot()
	parts := *p.acc.parts.Load()
	if len(parts) == 0 {
		return next, false
	}
	urgent := closing || p.acc.flushes.Load() > 0 || p.pool.hasWaiters()
	linger := time.Duration(p.acc.lingerNs)
	soon := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}

	type drained struct {
		b      *broker.Broker
		bytes  int
		bs     []*batch
		topics map[string]*cluster.Topic
	}
	var byLeader map[int32]*drained
	// waited: leader → the first partition of it, in this pass's order,
	// whose batches had to wait: left out of the leader's request for
	// max.request.size, or muted (its batch in flight). It goes first in
	// the leader's next request (drainFirst), so that the leader's
	// partitions take turns.
	var waited map[int32]int
	wait := func(leader int32, idx int) {
		if _, ok := waited[leader]; !ok {
			if waited == nil {
				waited = map[int32]int{}
			}
			waited[leader] = idx
		}
	}
	notReady := map[int32]bool{}
	needMeta := false

	n := len(parts)
	s.rotate = (s.rotate + 1) % n
	deferred := s.deferred[:0]
	// lingering: partitions whose first batch was not sendable on its
	// own. Once every partition was visited (and the deferred ones, which
	// are all known once i reaches n), those of a leader that gets a
	// request this pass ride along in it, as Java's drain takes the first
	// batch of every partition of a ready node; the others wait for their
	// linger deadline.
	lingering := s.lingering[:0]
	for i := 0; i < n+len(deferred)+len(lingering); i++ {
		var idx int
		ride := false
		switch r := i - n - len(deferred); {
		case i < n:
			idx = (s.rotate + i) % n
			if len(s.drainFirst) > 0 {
				q := parts[idx]
				// A partition of a leader whose last request was full
				// waits until after the one that did not fit then.
				if first, ok := s.drainFirst[snap.Leader(q.topic.name, q.partition)]; ok && i < (first-s.rotate+n)%n {
					deferred = append(deferred, idx)
					continue
				}
			}
		case r < 0:
			idx = deferred[i-n]
		default:
			l := lingering[r]
			if byLeader[l.leader] == nil {
				soon(l.due)
				continue
			}
			idx, ride = l.idx, true
		}
		q := parts[idx]
		if s.idemOn {
			s.resolveSuspect(q)
		}
		q.mu.Lock()
		s.expireQueuedLocked(q, now)
		if len(q.batches) == 0 || !canDrain {
			q.mu.Unlock()
			continue
		}
		b := q.batches[0]
		q.topic.touch(now) // records wait for it: keep its metadata
		soon(b.created.Add(p.cfg.DeliveryTimeout))
		if b.retryAt.After(now) {
			if !(b.sent && b.leaderEpoch >= 0 && leaderEpoch(snap, b) > b.leaderEpoch) {
				soon(b.retryAt)
				q.mu.Unlock()
				continue
			}
			// The metadata names a newer leader than the one that
			// failed it: retry now, as Java's
			// hasLeaderChangedForTheOngoingRetry does.
			b.retryAt = time.Time{}
		}
		if (p.guaranteeOrder || q.splitting > 0) && q.inflight > 0 {
			q.mu.Unlock() // muted until its batch in flight completes
			if leader := snap.Leader(q.topic.name, q.partition); leader >= 0 {
				wait(leader, idx)
			}
			continue
		}
		if s.txn.on && !s.txnMayDrain(q, b) {
			q.mu.Unlock() // v1: not in the transaction yet
			continue
		}
		if s.idemOn && !s.mayDrainIdempotent(q, b) {
			q.mu.Unlock()
			continue
		}
		// Full, as Java's deque.size() > 1 || batch.isFull(), and also a
		// batch that reached its limit exactly: one record larger than
		// batch.size (or any with batch.size=0) goes at once. (Java's
		// limit for such a batch is an upper bound with 21 bytes of
		// slack, so there it waits for linger.ms.)
		sendable := ride || len(q.batches) > 1 || b.full || b.bld.IsFull(b.limit) || urgent || now.Sub(b.created) >= linger
		leader := snap.Leader(q.topic.name, q.partition)
		if !sendable {
			if leader >= 0 {
				lingering = append(lingering, lingerer{idx: idx, leader: leader, due: b.created.Add(linger)})
			} else {
				soon(b.created.Add(linger))
			}
			q.mu.Unlock()
			continue
		}
		if leader < 0 {
			needMeta = true
			q.mu.Unlock()
			continue
		}
		if notReady[leader] {
			q.mu.Unlock()
			continue
		}
		d := byLeader[leader]
		if d == nil {
			if until, ok := s.throttled[leader]; ok && until.After(now) {
				soon(until)
				notReady[leader] = true
				q.mu.Unlock()
				continue
			}
			br := p.cl.Broker(leader)
			if br == nil || !br.Ready() {
				if br == nil {
					needMeta = true
				} else if t := br.BackoffUntil(); t.After(now) {
					soon(t)
				}
				notReady[leader] = true
				q.mu.Unlock()
				continue
			}
			d = &drained{b: br, topics: map[string]*cluster.Topic{}}
			if byLeader == nil {
				byLeader = map[int32]*drained{}
			}
			byLeader[leader] = d
		}
		size := len(b.wire)
		if b.wire == nil {
			size = b.bld.Size()
		}
		if len(d.bs) > 0 && d.bytes+size > p.cfg.MaxRequestSize {
			if ride {
				soon(b.created.Add(linger)) // its own turn at its deadline
			} else {
				wait(leader, idx)
			}
			q.mu.Unlock()
			continue // next round
		}
		// Once full is set under the lock no appender touches the batch,
		// so it is sealed outside the lock.
		b.full = true
		q.batches[0] = nil
		q.batches = q.batches[1:]
		q.mu.Unlock()
		if b.wire == nil {
			if s.idemOn {
				s.sealIdempotent(q, b)
			} else {
				b.wire = b.bld.Seal(p.acc.codecOpts)
			}
			if p.acc.compressed {
				q.topic.observeCompression(b.bld.CompressionRatio())
				if b.limit == p.cfg.BatchSize {
					q.lastRaw.Store(int64(b.bld.UncompressedSize())) // sizes the next batch's buffer
				}
			}
		}
		q.inflight++
		d.bs = append(d.bs, b)
		d.bytes += len(b.wire)
		d.topics[q.topic.name] = snap.Topics[q.topic.name]
		b.leaderEpoch = leaderEpoch(snap, b) // the leader it goes to, for the callback
	}
	if needMeta {
		p.cl.RequestRefresh()
	}
	if s.txn.on {
		s.txnAddNeeded()
	}
	s.deferred = deferred[:0]
	s.lingering = lingering[:0]
	for leader, d := range byLeader {
		if first, ok := waited[leader]; ok {
			if s.drainFirst == nil {
				s.drainFirst = map[int32]int{}
			}
			s.drainFirst[leader] = first
		} else {
			delete(s.drainFirst, leader)
		}
		s.send(leader, d.b, d.bs, d.topics)
		sent = true
	}
	return next, sent
}

// lingerer is a partition whose first batch was not sendable in a
// sendReady pass: its index in the accumulator's parts, its leader then,
// and when it would be sendable on its own.
type lingerer struct {
	idx    int
	leader int32
	due    time.Time
}

// send builds one produce request for a broker and hands it to the
// connection. The broker was Ready a moment ago; if it is not any more,
// the batches go back to the front of their deques untouched.
func (s *sender) send(leader int32, br *broker.Broker, bs []*batch, topics map[string]*cluster.Topic) {
	p := s.p
	// produceRequest, not kmsg.ProduceRequest: on a plain TCP connection
	// the batches are written from b.wire itself (produce_request.go).
	req := newProduceRequest(int16(p.cfg.Acks), int32(p.cfg.RequestTimeout/time.Millisecond), len(bs))
	req.zstd = p.cfg.CompressionType == CompressionZstd
	for _, b := range bs {
		name := b.q.topic.name
		if t := req.add(name, b.q.partition, b.wire); t != nil {
			if mt := topics[name]; mt != nil {
				t.id = mt.ID // Produce v13 names topics by id (KIP-516)
			}
		}
	}
	res := &produceResult{broker: leader, batches: bs, sentAt: time.Now(), ids: topicIDs(topics)}
	noResp := p.cfg.Acks == AcksNone
	if s.txn.on {
		s.txnProduce(req)
	}
	ok := br.TrySend(req, noResp, func(resp kmsg.Response, err error) {
		res.resp, res.err, res.doneAt = resp, err, time.Now()
		s.resMu.Lock()
		s.results = append(s.results, res)
		s.resMu.Unlock()
		s.wake()
	})
	if !ok {
		for _, b := range bs {
			b.q.inflight--
			s.requeue(b)
		}
		return
	}
	s.inflight++
	nrecs := 0
	for _, b := range bs {
		nrecs += len(b.recs)
	}
	p.metrics.requests.add(res.sentAt, 1)
	p.metrics.recsPerReq.record(res.sentAt, float64(nrecs))
	p.metrics.inFlight.Store(int64(s.inflight))
	for _, b := range bs {
		// Counted when the request is handed over, not when drained: a
		// batch the connection refused goes back to its deque unsent.
		p.metrics.onSent(b, res.sentAt)
		b.inFlight = true
		b.sent = true
		b.sends++
		s.inFlightB[b] = struct{}{}
		if d := b.created.Add(p.cfg.DeliveryTimeout); s.inFlightNext.IsZero() || d.Before(s.inFlightNext) {
			s.inFlightNext = d
		}
	}
}

// requeue puts a batch back at the front of its deque, in creation order
// among the batches already put back, so that retries keep their order.
func (s *sender) requeue(b *batch) {
	q := b.q
	q.mu.Lock()
	i := 0
	for i < len(q.batches) && q.batches[i].wire != nil && q.batches[i].id < b.id {
		i++
	}
	q.batches = append(q.batches, nil)
	copy(q.batches[i+1:], q.batches[i:])
	q.batches[i] = b
	q.mu.Unlock()
}

func (s *sender) handleResults() {
	s.resMu.Lock()
	rs := s.results
	s.results = nil
	s.resMu.Unlock()
	for _, r := range rs {
		s.inflight--
		s.p.metrics.inFlight.Store(int64(s.inflight))
		s.handle(r)
	}
}

func (s *sender) handle(r *produceResult) {
	p := s.p
	now := time.Now()
	for _, b := range r.batches {
		b.q.inflight--
		b.inFlight = false
		delete(s.inFlightB, b)
	}
	if r.err != nil {
		// The request as a whole failed: network, timeout, version.
		p.cl.RequestRefresh()
		s.maybeIdempotentFatal(r.err)
		for _, b := range r.batches {
			b.mayHaveBeenWritten(r.sentAt) // the broker may have written it before the request failed
			s.retryOrFail(b, now, r.err, kerr.IsRetriable(r.err))
		}
		return
	}
	if r.resp == nil { // acks=0: done once written
		for _, b := range r.batches {
			s.succeed(b, -1, -1)
		}
		return
	}
	resp := r.resp.(*kmsg.ProduceResponse)
	// From the request to its response: not the time earlier callbacks
	// of this round took.
	p.metrics.latency.record(now, float64(r.doneAt.Sub(r.sentAt))/float64(time.Millisecond))
	p.metrics.throttle.record(now, float64(resp.ThrottleMillis))
	if resp.ThrottleMillis > 0 {
		// Kafka ≥ 2.0 throttles after answering (KIP-219): the client
		// must not send to that broker until the time has passed.
		s.throttled[r.broker] = now.Add(time.Duration(resp.ThrottleMillis) * time.Millisecond)
	}
	answered := make(map[*batch]bool, len(r.batches))
	refresh := false
	var hints []cluster.LeaderHint
	var hinted []*batch
	for _, t := range resp.Topics {
		name := t.Topic
		if name == "" {
			// By the ids the request was sent with, not the current
			// metadata's: a topic recreated meanwhile has a new id.
			name = r.ids[t.TopicID]
		}
		for _, rp := range t.Partitions {
			b := findBatch(r.batches, name, rp.Partition)
			if b == nil || answered[b] {
				continue
			}
			answered[b] = true
			if rp.ErrorCode == 0 || (s.idemOn && rp.ErrorCode == kerr.DuplicateSequenceNumber.Code) {
				// A duplicate is a retry of a batch the broker already
				// has: it is delivered (KIP-98).
				s.succeed(b, rp.BaseOffset, rp.LogAppendTime)
				continue
			}
			be := kerr.ForCode(rp.ErrorCode).(*kerr.BrokerError)
			msg := ""
			if rp.ErrorMessage != nil {
				msg = *rp.ErrorMessage
			}
			err := &kerr.ResponseError{Err: be, Message: msg, Broker: r.broker, Topic: name, Partition: rp.Partition}
			s.maybeIdempotentFatal(err)
			// Split whatever the time, as Java's completeBatch does: past
			// delivery.timeout.ms the parts expire in the deque with
			// ErrDeliveryTimeout, where failing the batch here would tell
			// each small record that it is too large.
			//
			// Not, with idempotence, a batch an earlier attempt of which
			// may have been written (the topic's max.message.bytes lowered
			// meanwhile), unless the topic's refusals show that attempt
			// was refused too (maySplit): its parts would take its
			// sequence numbers under other boundaries, which the broker
			// refuses as out of order, and the epoch bump that follows
			// would write them again. It fails as too large instead (Java
			// splits it, and writes it twice).
			if be.Code == kerr.MessageTooLarge.Code {
				b.q.topic.refusedTooLarge(refusal{answeredAt: r.doneAt, size: len(b.wire)})
			}
			if be.Code == kerr.MessageTooLarge.Code && len(b.recs) > 1 && !b.completed && !isClosed(s.force) {
				if s.maySplit(b) {
					s.splitTooLarge(b, err) // the batch is too large, not its records
					continue
				}
				s.retryOrFail(b, now, fmt.Errorf("%w; not sent again in parts: an earlier attempt of this batch may have been written (its answer was lost), and its records in new batches could be written twice; lower batch.size below the topic's max.message.bytes", err), false)
				continue
			}
			if be.Code == kerr.RequestTimedOut.Code || be.Code == kerr.NotEnoughReplicasAfterAppend.Code {
				b.mayHaveBeenWritten(r.sentAt) // the leader wrote it, then could not say it was replicated
			}
			if leaderMoved(be) {
				if h, ok := leaderHint(name, &rp); ok {
					hints = append(hints, h)
					hinted = append(hinted, b)
				} else {
					refresh = true
				}
			}
			retriable := be.Retriable
			if s.idemOn && !b.completed {
				retriable = s.idempotentRetry(b, &rp, be)
			}
			if !retriable && len(rp.ErrorRecords) > 0 {
				b.recErrs = recordErrors(r.broker, name, &rp, be, msg)
			}
			s.retryOrFail(b, now, err, retriable)
		}
	}
	for _, b := range r.batches {
		if !answered[b] {
			s.retryOrFail(b, now, fmt.Errorf("%w: broker %d did not answer for %s[%d] in its produce response",
				kerr.ErrConnectionLost, r.broker, b.q.topic.name, b.q.partition), true)
		}
	}
	if len(hints) > 0 && s.applyLeaderHints(r.broker, hints, hinted, resp.Brokers, now) {
		refresh = true
	}
	if refresh {
		p.cl.RequestRefresh()
	}
}

// recordErrors are the records a produce response names as the cause of
// its partition's error (record_errors, Produce v8+, KIP-467), each with
// that record's own message when it gave one, by index in the batch. The
// partition's error code is the error of one record only: with several,
// it belongs to one of them, and the broker reports each one's reason in
// its message, so each gets INVALID_RECORD with that message, as in
// Java's Sender.failBatch (one record with no key on a compacted topic in
// a batch with a bad timestamp must not learn INVALID_TIMESTAMP).
func recordErrors(broker int32, topic string, rp *kmsg.ProduceResponseTopicPartition, be *kerr.BrokerError, msg string) map[int32]error {
	errs := make(map[int32]error, len(rp.ErrorRecords))
	if len(rp.ErrorRecords) > 1 {
		be = kerr.InvalidRecord
	}
	for _, re := range rp.ErrorRecords {
		m := msg
		if re.ErrorMessage != nil && *re.ErrorMessage != "" {
			m = *re.ErrorMessage
		}
		errs[re.RelativeOffset] = &kerr.ResponseError{Err: be, Message: m, Broker: broker, Topic: topic, Partition: rp.Partition}
	}
	return errs
}

// leaderHint is the partition's new leader that a NOT_LEADER_OR_FOLLOWER
// or FENCED_LEADER_EPOCH answer names (KIP-951, Produce v10+), if any.
func leaderHint(topic string, rp *kmsg.ProduceResponseTopicPartition) (cluster.LeaderHint, bool) {
	if rp.ErrorCode != kerr.NotLeaderOrFollower.Code && rp.ErrorCode != kerr.FencedLeaderEpoch.Code {
		return cluster.LeaderHint{}, false
	}
	cl := rp.CurrentLeader
	if cl.LeaderID < 0 || cl.LeaderEpoch < 0 {
		return cluster.LeaderHint{}, false
	}
	return cluster.LeaderHint{Topic: topic, Partition: rp.Partition, Leader: cl.LeaderID, Epoch: cl.LeaderEpoch}, true
}

// applyLeaderHints installs the leaders a produce response named, as the
// Java client does since KIP-951, so that the batches go to the new
// leader without waiting for a Metadata request, and without retry
// backoff (batches[i] is the batch hints[i] came with). It reports whether
// metadata must be refreshed after all: a hint named a broker that
// neither metadata nor the response's endpoints describe.
func (s *sender) applyLeaderHints(from int32, hints []cluster.LeaderHint, batches []*batch, endpoints []kmsg.ProduceResponseBroker, now time.Time) (refresh bool) {
	nodes := make([]cluster.BrokerInfo, 0, len(endpoints))
	for _, e := range endpoints {
		bi := cluster.BrokerInfo{ID: e.NodeID, Host: e.Host, Port: e.Port}
		if e.Rack != nil {
			bi.Rack = *e.Rack
		}
		nodes = append(nodes, bi)
	}
	s.p.cl.UpdateLeaders(hints, nodes)
	snap := s.p.cl.Snapshot()
	for i, h := range hints {
		leader := snap.Leader(h.Topic, h.Partition)
		if leader != h.Leader {
			refresh = true // the hint was stale or named an unknown broker
			continue
		}
		if b := batches[i]; !b.completed && leader != from {
			// The leader moved: retry at once. The batch is back in its
			// deque, where Send's adaptive partitioner reads retryAt
			// (partq.queueState), so under the deque's lock.
			b.q.mu.Lock()
			b.retryAt = now
			b.q.mu.Unlock()
		}
	}
	return refresh
}

func findBatch(bs []*batch, topic string, partition int32) *batch {
	for _, b := range bs {
		if b.q.partition == partition && b.q.topic.name == topic {
			return b
		}
	}
	return nil
}

func leaderEpoch(snap *cluster.Snapshot, b *batch) int32 {
	if t := snap.Topics[b.q.topic.name]; t != nil && int(b.q.partition) < len(t.Partitions) {
		return t.Partitions[b.q.partition].LeaderEpoch
	}
	return -1
}

// leaderMoved: errors after which the metadata is stale.
func leaderMoved(be *kerr.BrokerError) bool {
	switch be.Code {
	case kerr.NotLeaderOrFollower.Code, kerr.LeaderNotAvailable.Code, kerr.UnknownTopicOrPartition.Code,
		kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code, kerr.KafkaStorageError.Code,
		// Java's other InvalidMetadataExceptions: the topic was deleted
		// and recreated (Produce v13 names it by id), or the replica set
		// is in flux.
		kerr.UnknownTopicID.Code, kerr.InconsistentTopicID.Code, kerr.NetworkException.Code, kerr.ReplicaNotAvailable.Code:
		return true
	}
	return false
}

// retryOrFail decides a batch's fate after a failed attempt: back to the
// front of its deque after backoff if the error is retriable and retries
// and delivery.timeout.ms allow, else fail it.
func (s *sender) retryOrFail(b *batch, now time.Time, cause error, retriable bool) {
	p := s.p
	if b.completed {
		// Failed by delivery.timeout.ms while in flight; its memory could
		// only be released now that the request is done.
		p.acc.release(b)
		return
	}
	switch {
	case isClosed(s.force):
		b.aborted = true
		s.failInOrder(b, fmt.Errorf("%w: the producer was closed before the broker acknowledged it, which may have written it (last error: %v)", kerr.ErrAborted, cause))
	case !retriable:
		s.failInOrder(b, cause)
	case now.Sub(b.created) >= p.cfg.DeliveryTimeout && s.olderQueued(b):
		// An older batch's retry waits in the deque: this one expires
		// there too, after it (sendReady), so that callbacks keep their
		// order.
		b.lastErr = cause
		s.requeue(b)
	case now.Sub(b.created) >= p.cfg.DeliveryTimeout:
		s.failInOrder(b, s.timeoutErr(b, now, cause))
	case b.attempts >= p.cfg.Retries:
		s.failInOrder(b, fmt.Errorf("giving up on %s[%d] after %d retries (retries; the default, unlimited within delivery.timeout.ms, would go on): %w", b.q.topic.name, b.q.partition, b.attempts, cause))
	default:
		b.attempts++
		b.lastErr = cause
		p.metrics.retries.add(now, int64(len(b.recs)))
		b.q.topic.metrics.retries.add(now, int64(len(b.recs)))
		backoff := broker.Backoff(p.cfg.RetryBackoff, p.cfg.RetryBackoffMax, b.attempts-1)
		b.retryAt = now.Add(backoff)
		p.log.Debug("retrying batch", "topic", b.q.topic.name, "partition", b.q.partition,
			"attempt", b.attempts, "backoff", backoff, "err", cause)
		s.requeue(b)
	}
}

func (s *sender) timeoutErr(b *batch, now time.Time, cause error) error {
	err := fmt.Errorf("%w: %d records for %s[%d] waited %v (delivery.timeout.ms %v), sent %d times",
		kerr.ErrDeliveryTimeout, len(b.recs), b.q.topic.name, b.q.partition, now.Sub(b.created).Round(time.Millisecond), s.p.cfg.DeliveryTimeout, b.sends)
	if cause != nil {
		err = fmt.Errorf("%w; last error: %w", err, cause)
	}
	if b.sent {
		err = fmt.Errorf("%w; it was sent, so it may or may not have been written", err)
	}
	if cause != nil {
		return fmt.Errorf("%w (the last error says what held it up; if the cluster is only slow, raise delivery.timeout.ms)", err)
	}
	return fmt.Errorf("%w (if the cluster is only slow, raise delivery.timeout.ms)", err)
}

// expireQueuedLocked fails batches at the front of a deque that have
// waited longer than delivery.timeout.ms (Java's expiredBatches).
func (s *sender) expireQueuedLocked(q *partq, now time.Time) {
	for len(q.batches) > 0 {
		b := q.batches[0]
		if now.Sub(b.created) < s.p.cfg.DeliveryTimeout {
			return
		}
		q.batches[0] = nil
		q.batches = q.batches[1:]
		b.full = true
		q.mu.Unlock()
		cause := b.lastErr
		if cause == nil {
			cause = s.whyNotSent(q)
		}
		// An older batch may still be in flight: expireInFlight skips
		// one whose older retry waits in this deque, and this round
		// expires that retry and the batches behind it; they wait for it.
		s.failInOrder(b, s.timeoutErr(b, now, cause))
		if s.idemOn {
			s.resolveSuspect(q) // may ask for a bump: the run loop sees it
		}
		q.mu.Lock()
	}
}

// whyNotSent explains a batch that expired in its deque.
func (s *sender) whyNotSent(q *partq) error {
	if s.idemOn && !s.idem.have && s.idem.lastErr != nil {
		return fmt.Errorf("the idempotent producer has no producer id yet (InitProducerId): %w", s.idem.lastErr)
	}
	leader := s.p.cl.Snapshot().Leader(q.topic.name, q.partition)
	if leader < 0 {
		return fmt.Errorf("no leader known for %s[%d]", q.topic.name, q.partition)
	}
	if br := s.p.cl.Broker(leader); br != nil {
		if err := br.LastError(); err != nil {
			return err
		}
	}
	return nil
}

// expireInFlight fails in-flight batches whose delivery.timeout.ms has
// passed, as the Java client does, so that the callback comes on time
// even when the broker does not answer; the late response is ignored.
func (s *sender) expireInFlight(now time.Time) (next time.Time) {
	if len(s.inFlightB) == 0 {
		s.inFlightNext = time.Time{}
		return next
	}
	if now.Before(s.inFlightNext) {
		return s.inFlightNext // no deadline has passed yet
	}
	defer func() { s.inFlightNext = next }()
	var expired []*batch
	for b := range s.inFlightB {
		deadline := b.created.Add(s.p.cfg.DeliveryTimeout)
		if now.Before(deadline) {
			if next.IsZero() || deadline.Before(next) {
				next = deadline
			}
			continue
		}
		if s.olderQueued(b) {
			// A retry of an older batch waits in the deque: it expires
			// first (sendReady, this round), this one on the next.
			next = now
			continue
		}
		expired = append(expired, b)
	}
	// In creation order (the map has none), so that each partition's
	// callbacks run in offset order.
	slices.SortFunc(expired, func(a, b *batch) int { return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.seq, b.seq)) })
	for _, b := range expired {
		delete(s.inFlightB, b)
		cause := b.lastErr
		if cause == nil {
			cause = errors.New("the broker has not answered the produce request yet")
		}
		s.complete(b, -1, -1, -1, s.timeoutErr(b, now, cause))
	}
	return next
}

// older reports whether batch a was created before batch b of the same
// partition (the parts of a split batch share its id, and follow its
// sequence order).
func older(a, b *batch) bool { return a.id < b.id || a.id == b.id && a.seq < b.seq }

// failInOrder fails b, which is not in flight, or, if an older batch of
// its partition is still under way (queued for a retry, in flight, or
// parked), parks the failure until that one has completed: a newer batch
// can fail for good (a non-retriable error, retries spent, a forced
// Close) while an older one waits for its retry, and the partition's
// callbacks must still run in order.
func (s *sender) failInOrder(b *batch, err error) {
	if !s.olderUnfinished(b) {
		s.complete(b, -1, -1, -1, err)
		return
	}
	delete(s.inFlightB, b)
	if s.idemOn && !b.acked {
		s.onBatchDone(b, err) // its sequences failed now, not when its callbacks run
		b.seqDone = true
	}
	s.park(parkedAck{b: b, baseOffset: -1, logAppendTime: -1, epoch: -1, err: err})
}

// olderUnfinished reports whether b's partition has a batch older than b
// that has not completed: unsettled (idempotence), parked, queued or in
// flight.
func (s *sender) olderUnfinished(b *batch) bool {
	return olderSettling(b) || s.olderQueued(b) || s.olderInFlight(b)
}

// olderSettling reports whether b's partition has a batch older than b
// that is unsettled (idempotence: sequenced, not completed) or parked.
// With idempotence, a sequenced batch older than b is never only queued or
// in flight: it is unsettled too.
func olderSettling(b *batch) bool {
	q := b.q
	return len(q.pending) > 0 && older(q.pending[0], b) || len(q.parked) > 0 && older(q.parked[0].b, b)
}

// olderQueued reports whether b's partition has a batch older than b
// waiting in its deque: a retry, put back at the front.
func (s *sender) olderQueued(b *batch) bool {
	q := b.q
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.batches) > 0 && older(q.batches[0], b)
}

// abortOlderQueued fails the queued batches older than every batch of
// their partition in flight (retries waiting for their backoff), before
// a forced close fails what is in flight: each partition's callbacks then
// run oldest first.
func (s *sender) abortOlderQueued(why func(*batch) error) {
	oldest := map[*partq]*batch{}
	for b := range s.inFlightB {
		if o, ok := oldest[b.q]; !ok || older(b, o) {
			oldest[b.q] = b
		}
	}
	for q, o := range oldest {
		s.abortFront(q, o, -1, why)
	}
}

// abortFront fails up to n (all, if n < 0) of the batches at the front of
// q's deque that are older than before (any, if before is nil), one at a
// time, each in its partition's order (failInOrder).
func (s *sender) abortFront(q *partq, before *batch, n int, why func(*batch) error) {
	for ; n != 0; n-- {
		b := s.takeFront(q, before)
		if b == nil {
			return
		}
		b.aborted = true
		s.failInOrder(b, why(b))
	}
}

// takeFront takes the batch at the front of q's deque, if there is one
// and it is older than before (any, if before is nil). One at a time,
// each just before it completes: the batches behind it stay queued
// meanwhile, so that a failure parked behind them (failInOrder) waits for
// them too.
func (s *sender) takeFront(q *partq, before *batch) *batch {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.batches) == 0 || before != nil && !older(q.batches[0], before) {
		return nil
	}
	b := q.batches[0]
	b.full = true
	q.batches[0] = nil
	q.batches = q.batches[1:]
	return b
}

// abortQueued fails every batch still in a deque (Close's ctx ended, or
// the producer hit a fatal error). A batch with an older one of its
// partition still in flight is parked behind it (failInOrder), so that
// the partition's callbacks keep their order.
func (s *sender) abortQueued(why func(*batch) error) {
	for _, q := range *s.p.acc.parts.Load() {
		q.mu.Lock()
		n := len(q.batches) // those queued now, not batches appended meanwhile
		q.mu.Unlock()
		s.abortFront(q, nil, n, why)
	}
}

// succeed completes a batch the broker acknowledged. A batch already
// failed by delivery.timeout.ms while in flight was written after all: its
// sequence still counts as acknowledged.
//
// With idempotence, a batch acknowledged while an older batch of its
// partition is unsettled (retried after an error although the broker had
// written it, e.g. NOT_ENOUGH_REPLICAS_AFTER_APPEND; the broker takes a
// sequence only after the one before it) counts as acknowledged at once,
// but its callbacks wait, parked, until the older batch completes, so
// that the partition's callbacks keep their offset order. (Java runs
// them at once, out of order.)
func (s *sender) succeed(b *batch, baseOffset, logAppendTime int64) {
	if b.completed {
		if s.idemOn && b.seq != noSeq {
			b.q.lastAcked = max(b.q.lastAcked, b.seq+int64(len(b.recs))-1)
			b.q.ackedPID = b.q.pid
		}
		s.p.acc.release(b)
		return
	}
	if s.idemOn && b.seq != noSeq && olderSettling(b) {
		s.onBatchDone(b, nil)
		b.acked = true
		delete(s.inFlightB, b)
		s.park(parkedAck{b, baseOffset, logAppendTime, b.leaderEpoch, nil})
		return
	}
	if !s.idemOn && olderSettling(b) {
		// At least once: an older batch's failure is parked behind a
		// batch still under way (failInOrder); this one's callbacks
		// wait behind it, so that they do not overtake it.
		delete(s.inFlightB, b)
		s.park(parkedAck{b, baseOffset, logAppendTime, b.leaderEpoch, nil})
		return
	}
	s.complete(b, baseOffset, logAppendTime, b.leaderEpoch, nil)
}

// parkedAck is a batch done with the broker whose callbacks wait for an
// older batch of its partition: acknowledged (succeed), or failed for
// good with err (failInOrder).
type parkedAck struct {
	b                         *batch
	baseOffset, logAppendTime int64
	epoch                     int32
	err                       error
}

// park adds pk to its partition's parked batches, kept oldest first.
func (s *sender) park(pk parkedAck) {
	q := pk.b.q
	i, _ := slices.BinarySearchFunc(q.parked, pk.b, func(pk parkedAck, b *batch) int {
		return cmp.Or(cmp.Compare(pk.b.id, b.id), cmp.Compare(pk.b.seq, b.seq))
	})
	q.parked = slices.Insert(q.parked, i, pk)
}

// unpark completes the parked batches of q that no unfinished batch is
// older than, oldest first.
func (s *sender) unpark(q *partq) {
	for len(q.parked) > 0 {
		pk := q.parked[0]
		if s.olderUnfinished(pk.b) { // (not the parked: pk is the oldest)
			return
		}
		q.parked[0] = parkedAck{}
		q.parked = q.parked[1:]
		s.complete(pk.b, pk.baseOffset, pk.logAppendTime, pk.epoch, pk.err)
	}
}

// unparkAll completes every parked batch, oldest first per partition:
// for the sender's forced end, when no batch is under way any more (each
// would have been completed by its older batch's completion already;
// this only makes sure no callback is left out).
func (s *sender) unparkAll() {
	for _, q := range *s.p.acc.parts.Load() {
		for len(q.parked) > 0 {
			pk := q.parked[0]
			q.parked[0] = parkedAck{}
			q.parked = q.parked[1:]
			s.complete(pk.b, pk.baseOffset, pk.logAppendTime, pk.epoch, pk.err)
		}
	}
}

// olderInFlight reports whether a batch of b's partition older than b is
// in flight.
func (s *sender) olderInFlight(b *batch) bool {
	if b.q.inflight == 0 {
		return false
	}
	for o := range s.inFlightB {
		if o.q == b.q && older(o, b) {
			return true
		}
	}
	return false
}

// complete runs every callback of a batch, in offset order, and frees it.
// Exactly once per batch: a batch failed by delivery.timeout.ms while in
// flight is marked completed, and its late response only frees it. The
// memory of a batch in flight is released when its request is done, as
// the connection may still be writing it.
func (s *sender) complete(b *batch, baseOffset, logAppendTime int64, epoch int32, err error) {
	if b.completed {
		return
	}
	b.completed = true
	delete(s.inFlightB, b)
	if b.parent != nil {
		b.q.splitting--
	}
	if err != nil {
		// As Java's failBatch: a batch aborted (a transaction abort, a
		// fatal error, a forced Close: Java's abortBatches) is not a
		// record error.
		if !b.aborted {
			now := time.Now()
			s.p.metrics.errors.add(now, int64(len(b.recs)))
			b.q.topic.metrics.errors.add(now, int64(len(b.recs)))
		}
		if isClosed(s.force) {
			s.forcedFails++
		}
	}
	if s.idemOn && !b.acked && !b.seqDone {
		s.onBatchDone(b, err)
	}
	if err != nil && s.txn.on {
		s.txnBatchFailed(b, err)
	}
	// The memory first, kept from Sends waiting elsewhere until the
	// callbacks are done: a callback that sends again (a record refused
	// with its batch, say) may need it, and cannot wait for memory, which
	// only this goroutine frees. The callbacks do not read the batch's
	// buffer.
	held := !b.inFlight
	if held {
		s.p.acc.pool.hold()
		s.p.acc.release(b)
	}
	for i := 0; i < len(b.recs); {
		i = s.callbacks(b, i, baseOffset, logAppendTime, epoch, err)
	}
	if held {
		s.p.acc.pool.unhold()
	}
	s.p.acc.finish(b)
	if len(b.q.parked) > 0 {
		s.unpark(b.q)
	}
}

// callbacks runs the callbacks of b's records from the i-th on, and
// returns where it stopped: at the end, or after a callback that
// panicked. A panicking callback is logged and the others run on, as the
// Java client logs an exception thrown by a callback: the sender
// goroutine, and with it every other record's callback and Close, must
// not die with it.
func (s *sender) callbacks(b *batch, i int, baseOffset, logAppendTime int64, epoch int32, err error) (next int) {
	part := b.q.partition
	s.inCallbacks.Store(true)
	defer func() {
		s.inCallbacks.Store(false)
		if v := recover(); v != nil {
			s.p.log.Error("a Send callback panicked; the other callbacks run on",
				"topic", b.q.topic.name, "partition", part, "panic", v, "stack", string(debug.Stack()))
			b.recs[i] = pending{}
			next = i + 1
		}
	}()
	for ; i < len(b.recs); i++ {
		pr := &b.recs[i]
		r := pr.rec
		if err == nil {
			r.Partition = part
			r.LeaderEpoch = epoch
			if baseOffset >= 0 {
				r.Offset = baseOffset + int64(i)
			} else {
				r.Offset = -1
			}
			if logAppendTime >= 0 {
				r.Timestamp = time.UnixMilli(logAppendTime)
			}
		} else {
			// As Java's failed RecordMetadata: the partition, no offset.
			r.Partition, r.Offset, r.LeaderEpoch = part, -1, -1
		}
		e := err
		if err != nil && b.recErrs != nil {
			// The broker named the invalid records: they get its error,
			// the others were refused with them (as in Java).
			if re, ok := b.recErrs[int32(i)]; ok {
				e = re
			} else {
				e = fmt.Errorf("%w: %s[%d]: its batch was refused (%v); send this record again", kerr.ErrBatchRejected, b.q.topic.name, part, err)
			}
		}
		pr.cb(r, e)
		*pr = pending{}
	}
	return i
}

// onGoroutine reports whether the caller runs on the sender goroutine,
// i.e. inside a callback. Outside callbacks it is one atomic load: a Send
// that waits for memory asks it once per batch, and with buffer.memory
// full that is every batch (reading the goroutine id there was 8% of the
// CPU of a producer against real brokers).
func (s *sender) onGoroutine() bool {
	// The sender goroutine sets inCallbacks itself before it calls a
	// callback, so there it reads true; elsewhere false means "not
	// the sender", and true (callbacks running meanwhile) asks the id.
	return s.inCallbacks.Load() && s.gid.Load() == goroutineID()
}

// goroutineID is the calling goroutine's id, from the first line of its
// stack ("goroutine 42 [running]:"). runtime.Stack walks the whole stack
// however little of it fits the buffer: a few microseconds, for calls
// that wait anyway or run during callbacks.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}
