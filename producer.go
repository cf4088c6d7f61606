package kprod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kprod/kprod/internal/broker"
	"github.com/kprod/kprod/internal/cluster"
	"github.com/kprod/kprod/internal/live"
	"github.com/kprod/kprod/internal/recbatch"
	"github.com/kprod/kprod/kerr"
)

// Producer sends records to Kafka. It is safe for concurrent use by any
// number of goroutines. Create one with NewProducer and Close it when
// done: Close returns only when every goroutine the producer started has
// ended.
type Producer struct {
	cfg Config
	log *slog.Logger

	metrics producerMetrics

	cl   *cluster.Client
	acc  *accumulator
	pool *bufferPool
	snd  *sender

	// guaranteeOrder: one batch in flight per partition, so that a retry
	// cannot reorder (max.in.flight.requests.per.connection=1).
	guaranteeOrder bool

	// txn is the transactional producer's state (transaction.go); nil
	// without a transactional.id.
	txn *txnManager

	// closed is set when Close begins: Send fails fast from then on.
	// Whether a Send under way got its record in is settled under the
	// partition's lock (accumulator.close), which costs Send no lock of
	// its own.
	closed atomic.Bool

	// sendMu is held for reading by every Send while it buffers, and
	// for writing by Close, only when Config.Partitioner is an
	// io.Closer (guardSends): Close then knows that no Send still calls
	// the partitioner it closes. It gets a cache line of its own, as
	// every such Send writes it.
	guardSends bool
	_          cacheLinePad
	sendMu     sync.RWMutex
	_          cacheLinePad

	// closing ends metadata waits of Sends under way when Close starts,
	// so that Close does not wait max.block.ms for them.
	closing     context.Context
	stopWaiting context.CancelFunc

	closeStarted atomic.Bool
	closeDone    chan struct{} // closed when Close has finished
	closeErr     error         // written by the first Close before closeDone is closed
	// pluginCloser is the goroutine id of the Close closing the
	// interceptors and the partitioner (0 before): a Close they call
	// there returns instead of waiting for itself.
	pluginCloser atomic.Uint64

	clock clock // the send path's clock (clock.go)
}

var producerSeq atomic.Int64

// NewProducer validates cfg and starts the producer's sender and metadata
// goroutines. It does not wait for the cluster: the first Send to a topic
// waits for its metadata (up to max.block.ms).
func NewProducer(cfg Config) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.validatePlugins(); err != nil {
		return nil, err
	}
	tlsConfig, saslMechanism, err := cfg.security()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		// Quiet by default: only warnings and errors, on stderr.
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	for _, w := range cfg.warnings {
		log.Warn(w)
	}
	if tlsConfig != nil && cfg.TLSConfig == nil && cfg.SSLEndpointIdentificationAlgorithm == "" {
		// Legal, as in Java, but also what a Config written in Go without
		// DefaultConfig gets: say so once.
		log.Warn("TLS without hostname verification: ssl.endpoint.identification.algorithm is empty, so a broker's certificate is checked against the trust store but not against its host name; set it to \"https\" (the default) unless that is meant")
	}
	if cfg.ClientID == "" {
		cfg.ClientID = fmt.Sprintf("kprod-producer-%d", producerSeq.Add(1))
	}
	codec, err := recbatch.ParseCodec(cfg.CompressionType)
	if err != nil {
		return nil, err
	}
	var seal recbatch.SealOptions
	if codec != recbatch.None {
		if seal.Compressor, err = recbatch.NewCompressor(codec, cfg.compressionLevel(codec)); err != nil {
			return nil, err
		}
	}
	p := &Producer{cfg: cfg, log: log, guaranteeOrder: !cfg.Idempotent() && cfg.MaxInFlight == 1, closeDone: make(chan struct{})}
	_, p.guardSends = cfg.Partitioner.(io.Closer)
	p.closing, p.stopWaiting = context.WithCancel(context.Background())
	if cfg.TransactionalID != "" {
		p.txn = newTxnManager(p)
	}
	p.snd = newSender(p)
	bcfg := &broker.Config{
		ClientID:            cfg.ClientID,
		SetupTimeout:        cfg.SocketConnectionSetupTimeout,
		SetupTimeoutMax:     cfg.SocketConnectionSetupTimeoutMax,
		RequestTimeout:      cfg.RequestTimeout,
		MaxInFlight:         cfg.MaxInFlight,
		IdleTimeout:         cfg.ConnectionsMaxIdle,
		ReconnectBackoff:    cfg.ReconnectBackoff,
		ReconnectBackoffMax: cfg.ReconnectBackoffMax,
		Dial:                cfg.Dial,
		SendBuffer:          cfg.SendBufferBytes,
		ReceiveBuffer:       cfg.ReceiveBufferBytes,
		TLS:                 tlsConfig,
		SASL:                saslMechanism,
		OnStateChange:       func(int32) { p.snd.wake() },
		Logger:              log,
	}
	cl, err := cluster.New(cluster.Config{
		Broker:             bcfg,
		Bootstrap:          cfg.BootstrapServers,
		MetadataMaxAge:     cfg.MetadataMaxAge,
		MetadataMaxIdle:    cfg.MetadataMaxIdle,
		RetryBackoff:       cfg.RetryBackoff,
		RetryBackoffMax:    cfg.RetryBackoffMax,
		AutoCreateTopics:   cfg.AllowAutoCreateTopics,
		Rebootstrap:        cfg.MetadataRecoveryStrategy == MetadataRecoveryRebootstrap,
		RebootstrapTrigger: cfg.MetadataRecoveryRebootstrapTrigger,
		OnUpdate:           func(*cluster.Snapshot) { p.snd.wake() },
		Logger:             log,
	})
	if err != nil {
		return nil, err
	}
	p.cl = cl
	p.pool = newBufferPool(cfg.BufferMemory, cfg.BatchSize)
	p.pool.onWait = p.snd.wake
	p.pool.cannotWait = p.snd.onGoroutine
	p.acc = newAccumulator(p.pool, cfg.BatchSize, cfg.Linger, seal, p.snd.wake)
	live.Go()
	go p.snd.run()
	return p, nil
}

// Send buffers a record for sending and returns; cb is called exactly
// once with the record's outcome: on success with Partition, Offset and
// Timestamp set, otherwise with an error that wraps one of the package's
// sentinels or a *kerr.BrokerError, or, when ctx ended while Send waited,
// ctx's error (context.Canceled, context.DeadlineExceeded).
//
// In a transaction, a record that fails makes CommitTransaction fail
// (ErrTransactionAbortable), except one refused for itself
// (ErrInvalidRecord, ErrSerialization) whose cb is not nil: the caller is
// told, as Java's send throws for it, and the transaction's other records
// stay committable. With a nil cb nobody would be, so that record too
// makes the transaction abortable.
//
// Send blocks only while it waits for the topic's metadata or for buffer
// memory, at most max.block.ms or until ctx ends. ctx bounds only that
// wait: once a record is buffered, its fate is governed by
// delivery.timeout.ms, not by ctx. A transactional Send also waits while
// CommitTransaction or AbortTransaction begins, as they wait for the
// Sends appending to the transaction (at most their max.block.ms), or
// until ctx ends: the record then fails, and makes the transaction
// abortable unless the commit or abort had taken it by then.
//
// If the record fails before it is buffered (bad record, unknown topic,
// buffer full, closed producer, ctx ended), cb runs on the caller's
// goroutine before Send returns. Otherwise it runs on the producer's
// sender goroutine: callbacks of one partition run in offset order, one at
// a time, and must not block — a slow callback delays every other
// record's delivery. Calls that wait for deliveries (Flush, SendSync,
// CommitTransaction, AbortTransaction) return ErrInCallback there; Close
// closes without waiting. A Send there does not wait for buffer memory,
// which only that goroutine frees: with no room for it at once, it fails
// with ErrBufferFull (the memory of the batch whose callbacks run is free
// already, for records sent again, and kept for them ahead of Sends
// waiting elsewhere, unless the batch expired while in flight or was
// split because the broker found it too large: its memory went back to
// the pool at the split, as in Java, and its parts are not charged). A
// transactional Send there fails with ErrTransactionState while
// CommitTransaction or AbortTransaction ends the transaction. cb may be
// nil.
func (p *Producer) Send(ctx context.Context, r *Record, cb func(*Record, error)) {
	p.sendWith(ctx, r, cb, cb == nil)
}

// sendWith is Send; silent says that nobody will learn of the record's
// failure (no callback: see txnManager.sendFailed).
func (p *Producer) sendWith(ctx context.Context, r *Record, cb func(*Record, error), silent bool) {
	if r != nil {
		// On its way while the partition is picked (recbatch.Prefetch).
		recbatch.Prefetch(r.Value)
	}
	if cb == nil {
		cb = func(*Record, error) {}
	}
	if len(p.cfg.Interceptors) > 0 {
		// The interceptors' OnAcknowledgement must also see records that
		// fail here: the wrapped callback reports those too.
		r, cb = p.intercept(r, cb)
	}
	if gen, err := p.send(ctx, r, cb); err != nil {
		// As Java's send: a record that fails before it is buffered
		// counts in record-error-total (not in record-send-total), but
		// for Java's IllegalStateExceptions, which its doSend does not
		// count: a Send on a closed producer, and a transactional Send
		// refused because no transaction is open or a commit or abort
		// is ending it (TransactionManager.maybeAddPartition). A refusal
		// for an abortable or fatal transaction (Java's KafkaException)
		// counts.
		var closed *sendClosedError
		if !errors.As(err, &closed) && !txnStateRefusal(err) {
			p.metrics.errors.add(time.Now(), 1)
		}
		if r != nil {
			r.failedUnbuffered()
		}
		if p.txn != nil {
			p.txn.sendFailed(r, gen, err, silent)
		}
		cb(r, err)
	}
}

// txnStateRefusal reports whether err is a transactional Send's refusal
// for the transaction's state (ErrTransactionState: none open, or one
// being committed or aborted), not for its failure.
func txnStateRefusal(err error) bool {
	return errors.Is(err, kerr.ErrTransactionState) && !errorsIsAbortable(err) && !errorsIsFatal(err)
}

// sendClosedError is Send's error once Close has begun, before the
// record reached its partition's deque.
type sendClosedError struct{ topic string }

func (e *sendClosedError) Error() string {
	return fmt.Sprintf("cannot send to %q: %v", e.topic, kerr.ErrClosed)
}

func (e *sendClosedError) Unwrap() error { return kerr.ErrClosed }

// SendSync sends a record and waits for its outcome. On success r holds
// its partition, offset and timestamp. ctx bounds what it bounds for
// Send, the wait to buffer the record (metadata, memory); once buffered,
// the record has its outcome within delivery.timeout.ms, and SendSync
// waits for it.
func (p *Producer) SendSync(ctx context.Context, r *Record) error {
	if err := p.refuseInCallback("SendSync", "the record's callback (Send does not)"); err != nil {
		return err
	}
	ch := make(chan error, 1)
	p.Send(ctx, r, func(_ *Record, err error) { ch <- err })
	return <-ch
}

// send buffers r or returns why not; Send then runs cb with the error.
// With a transactional.id it also returns the transaction the record was
// sent in (0 if none). It has one defer and few returns, so the defer
// costs no more than the call (a defer the compiler cannot open-code was
// 3% of Send's profile).
func (p *Producer) send(ctx context.Context, r *Record, cb func(*Record, error)) (gen uint64, err error) {
	if r == nil {
		return 0, fmt.Errorf("%w: nil record", kerr.ErrInvalidRecord)
	}
	if r.Topic == "" {
		return 0, fmt.Errorf("%w: the record has no topic", kerr.ErrInvalidRecord)
	}
	if r.PartitionSet && r.Partition < 0 {
		// Java's ProducerRecord refuses it when the record is made.
		return 0, fmt.Errorf("%w: partition %d of %q is negative", kerr.ErrInvalidRecord, r.Partition, r.Topic)
	}
	if !r.Timestamp.IsZero() && r.Timestamp.UnixMilli() < 0 {
		// Java's ProducerRecord too: -1 would read as "no timestamp".
		return 0, fmt.Errorf("%w: the timestamp %s of the record for %q is before 1970; leave Timestamp zero for the time of Send",
			kerr.ErrInvalidRecord, r.Timestamp.UTC().Format(time.RFC3339Nano), r.Topic)
	}
	if p.txn != nil {
		if p.closed.Load() {
			// Not "call BeginTransaction", which Close makes wrong.
			return 0, &sendClosedError{topic: r.Topic}
		}
		// Fail fast outside a transaction; checked again at the append.
		if gen, err = p.txn.checkSend(r.Topic); err != nil {
			if p.closed.Load() {
				// Close began meanwhile and is ending the transaction.
				return 0, &sendClosedError{topic: r.Topic}
			}
			return gen, err
		}
	}
	if p.guardSends {
		p.sendMu.RLock()
		defer p.sendMu.RUnlock()
	}
	return gen, p.buffer(ctx, r, cb, gen)
}

// buffer is Send's work: metadata, partition, append. gen is the
// transaction the record was sent in (0 if not transactional).
func (p *Producer) buffer(ctx context.Context, r *Record, cb func(*Record, error), gen uint64) error {
	if p.closed.Load() {
		return &sendClosedError{topic: r.Topic}
	}
	// The clock is read only when needed: for the record's timestamp if
	// it has none, and to bound a wait for metadata.
	var start time.Time
	var ts int64
	stamp := r.Timestamp.IsZero()
	if stamp {
		start = p.clock.now()
		ts = start.UnixMilli()
	} else {
		ts = r.Timestamp.UnixMilli()
	}

	t := p.acc.topic(r.Topic)
	mt := t.metadata(p.cl.Snapshot())
	waited := false
	if mt == nil || mt.Err != nil || len(mt.Partitions) == 0 ||
		(r.PartitionSet && int(r.Partition) >= len(mt.Partitions)) {
		if start.IsZero() {
			start = p.clock.now()
		}
		var err error
		if mt, err = p.waitMetadata(ctx, r, start); err != nil {
			return err
		}
		waited = true
	}
	if t.use.Load() == nil {
		// The same handle for every caller. It is touched (kept in
		// metadata requests) whenever the topic gets a new batch and
		// whenever the sender finds batches of it queued.
		t.use.Store(p.cl.UseTopic(r.Topic))
	}

	sz := newRecSizes(r.Key, r.Value, r.Headers)
	// Java's ensureValidRecordSize: the uncompressed upper bound.
	if bound := sizeUpperBound(sz.fields); bound > p.cfg.MaxRequestSize {
		return fmt.Errorf("%w: the record for %q is %d bytes when serialized (as the Java client counts), more than max.request.size (%d); raise max.request.size (and the topic's max.message.bytes) or send it smaller",
			kerr.ErrRecordTooLarge, r.Topic, bound, p.cfg.MaxRequestSize)
	} else if int64(bound) > p.cfg.BufferMemory {
		return fmt.Errorf("%w: the record for %q is %d bytes when serialized, more than buffer.memory (%d)",
			kerr.ErrRecordTooLarge, r.Topic, bound, p.cfg.BufferMemory)
	}

	part, err := p.partition(t, mt, r)
	if err != nil {
		return err
	}
	// Decided before the append: once the record is in a batch, its
	// callback may run (and its owner reuse it) before Send returns.
	sticky := p.sticky(r)
	q := p.acc.queue(t, part)
	maxBlock := p.cfg.MaxBlock
	if waited {
		maxBlock -= time.Since(start)
	}
	if stamp {
		// Set only now, just before the append, so that the callback
		// sees it; reset if the record is not buffered after all, so that
		// a Send that failed at once can be repeated with a new time, as
		// a Java ProducerRecord without a timestamp would. Once buffered
		// the record keeps it (see Record.Timestamp). Kafka keeps
		// milliseconds: the timestamp the log will have.
		r.Timestamp = time.UnixMilli(ts)
	}
	var res appendResult
	if p.txn != nil {
		if err = p.txn.beginSend(ctx, r.Topic, gen); err != nil {
			if stamp {
				r.Timestamp = time.Time{}
			}
			if p.closed.Load() {
				// Close, which does not wait for this Send, may have
				// aborted the transaction meanwhile: "call
				// BeginTransaction" would be wrong.
				return &sendClosedError{topic: r.Topic}
			}
			return err
		}
		part, res, err = p.appendTo(ctx, t, mt, q, part, r, ts, cb, sz, maxBlock, sticky)
		if err != nil {
			// Before appendMu is released: a commit waiting for it must
			// find the transaction abortable, not commit without the
			// record. (Send reports it again: a no-op then.)
			p.txn.sendFailed(r, 0, err, false)
		}
		p.txn.appendMu.RUnlock()
	} else {
		part, res, err = p.appendTo(ctx, t, mt, q, part, r, ts, cb, sz, maxBlock, sticky)
	}
	if err != nil {
		if stamp {
			r.Timestamp = time.Time{}
		}
		return fmt.Errorf("cannot buffer the record for %s[%d]: %w", r.Topic, part, err)
	}
	if sticky {
		// Java counts what the record added to its batch's estimated
		// size: with compression, the estimated compressed bytes, so that
		// the partition takes a whole (compressed) batch before a switch;
		// the first record of a batch adds the batch header too.
		p.stickyAppended(t, mt, part, res.appended, res.lastFull)
	}
	return nil
}

// appendTo appends r to partition part (queue q). A sticky record whose
// partition must change first (errSwitchSticky: Java's partitionChanged)
// goes to the next sticky partition instead; appendTo returns the
// partition the record went to.
func (p *Producer) appendTo(ctx context.Context, t *topicState, mt *cluster.Topic, q *partq, part int32, r *Record, ts int64,
	cb func(*Record, error), sz recSizes, maxBlock time.Duration, sticky bool) (int32, appendResult, error) {
	var held heldBuf // memory an append got for a partition it then had to leave
	for {
		res, err := p.acc.append(ctx, q, r, ts, cb, sz, maxBlock, sticky, &held)
		if err != errSwitchSticky {
			return part, res, err
		}
		part = p.stickySwitch(t, mt, part)
		q = p.acc.queue(t, part)
	}
}

// waitMetadata waits, up to max.block.ms, for the topic's metadata and,
// for an explicit partition, for the topic to have that partition.
func (p *Producer) waitMetadata(callerCtx context.Context, r *Record, start time.Time) (*cluster.Topic, error) {
	ctx, cancel := context.WithDeadline(callerCtx, start.Add(p.cfg.MaxBlock))
	defer cancel()
	defer context.AfterFunc(p.closing, cancel)()
	// ended says why the wait ended early, if it did: the producer was
	// closed, or the Send's own ctx ended (not max.block.ms).
	ended := func() error {
		if p.closing.Err() != nil {
			return fmt.Errorf("waiting for metadata of %q: %w", r.Topic, kerr.ErrClosed)
		}
		if err := callerCtx.Err(); err != nil {
			return fmt.Errorf("waiting for metadata of %q: the call's ctx ended: %w", r.Topic, err)
		}
		return nil
	}
	for {
		mt, err := p.cl.WaitTopic(ctx, r.Topic)
		if err != nil {
			if eerr := ended(); eerr != nil {
				return nil, eerr
			}
			return nil, err
		}
		if !r.PartitionSet {
			timeSince(&p.metrics.metadataWaitNs, start)
			return mt, nil
		}
		if r.Partition < 0 {
			return nil, fmt.Errorf("%w: partition %d of %q is negative", kerr.ErrInvalidRecord, r.Partition, r.Topic)
		}
		if int(r.Partition) < len(mt.Partitions) {
			timeSince(&p.metrics.metadataWaitNs, start)
			return mt, nil
		}
		// The topic may have just grown: ask again until max.block.ms.
		err = p.cl.Refresh(ctx)
		if err != nil && ctx.Err() == nil && cluster.EndsWait(err) {
			// As WaitTopic: refused credentials, say, fail at once.
			return nil, fmt.Errorf("waiting for partition %d of %q: %w", r.Partition, r.Topic, err)
		}
		if err != nil && ctx.Err() != nil {
			if eerr := ended(); eerr != nil {
				return nil, eerr
			}
			return nil, fmt.Errorf("%w: %q has %d partitions, the record asks for partition %d (%w: waited %v for more)",
				kerr.ErrUnknownPartition, r.Topic, len(mt.Partitions), r.Partition, kerr.ErrMetadataTimeout, p.cfg.MaxBlock)
		}
	}
}

// Flush sends every record buffered before the call at once (ignoring
// linger.ms) and returns when each has its outcome, or when ctx ends.
func (p *Producer) Flush(ctx context.Context) error {
	if err := p.refuseInCallback("Flush", "the records' callbacks"); err != nil {
		return err // as Java's flush
	}
	defer timeSince(&p.metrics.flushNs, time.Now())
	return p.flush(ctx)
}

// flush is Flush without its checks and its flush-time-ns-total (Java's
// commitTransaction does not count as a flush either).
func (p *Producer) flush(ctx context.Context) error {
	p.acc.flushes.Add(1)
	defer p.acc.flushes.Add(-1)
	waits := p.acc.snapshotIncomplete()
	p.snd.wake()
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("flush: %w", ctx.Err())
		}
	}
	return nil
}

// refuseInCallback is the error of a call that waits for deliveries (op,
// which waits for what) when it is made inside a callback: callbacks run
// on the sender goroutine, which would then wait for itself. nil
// anywhere else.
func (p *Producer) refuseInCallback(op, waitsFor string) error {
	if !p.snd.onGoroutine() {
		return nil
	}
	return fmt.Errorf("%w: %s waits for %s, and callbacks run on the goroutine this call was made on; call it from another goroutine", kerr.ErrInCallback, op, waitsFor)
}

// Close stops accepting records (Send then fails with ErrClosed), sends
// what is buffered, and waits for it until ctx ends; then what is still
// buffered or in flight fails with ErrAborted. It returns when every
// goroutine the producer started has ended, and every callback has run.
// It returns ctx's error if records had to be aborted. A Send that runs
// at the same time either buffers its record before the producer stops
// accepting, and the record is delivered as above, or fails with
// ErrClosed. Close does not wait for that Send to return, so the
// callback of a record refused that way, which runs on the Send's
// goroutine, may run after Close has returned.
//
// Last, it calls Close on each of Config.Interceptors that implements
// io.Closer, in order (see Interceptor), then on Config.Partitioner if it
// implements io.Closer; their errors are logged, not returned. Calling
// Close again waits for the first call to finish and returns the same
// error (called from an interceptor's or the partitioner's Close, it
// returns that error at once).
//
// Called from a callback, Close cannot wait for the goroutine it runs on:
// as the Java client's close from a callback (close(0)), it closes at
// once, what is not delivered yet fails with ErrAborted, and the rest of
// the closing happens when the callback returns. It returns an error
// wrapping ErrAborted, and logs a warning; if another Close is already
// under way, it returns nil at once and that Close goes on as it would.
func (p *Producer) Close(ctx context.Context) error {
	inCallback := p.snd.onGoroutine()
	first := p.closeStarted.CompareAndSwap(false, true)
	if inCallback {
		if first {
			return p.closeFromCallback()
		}
		return nil // the Close under way finishes once this callback returns
	}
	if first {
		p.close(ctx)
	} else if id := p.pluginCloser.Load(); id != 0 && id == goroutineID() {
		// From an interceptor's or the partitioner's Close, which the
		// first Close runs last: waiting would be for itself.
		return p.closeErr
	}
	<-p.closeDone
	return p.closeErr
}

// stopAccepting is the start of every Close: Send fails with ErrClosed
// from now on, and every record of a Send under way is in its deque, for
// the sender to deliver, or refused.
func (p *Producer) stopAccepting() {
	p.closed.Store(true)
	p.stopWaiting() // ends metadata waits of Sends under way
	p.pool.close()  // wakes Sends blocked on memory
	p.acc.close()
	if p.guardSends {
		p.sendMu.Lock()
		p.sendMu.Unlock() //nolint:staticcheck // empty critical section: waits out Sends calling the partitioner
	}
}

func (p *Producer) closeFromCallback() error {
	p.stopAccepting()
	err := fmt.Errorf("close: called from a callback, which cannot wait for deliveries; records not yet delivered failed with %w", kerr.ErrAborted)
	p.closeErr = err // read by other Closes after closeDone, which the sender closes after this
	p.log.Warn("Close called from a callback: closing without waiting (as Java's close(0)); records not yet delivered fail with ErrAborted")
	p.snd.finishClose.Store(true)
	p.snd.startClosing()
	p.forceClose()
	return err
}

func (p *Producer) close(ctx context.Context) {
	p.stopAccepting()
	if p.txn != nil {
		p.txn.closeAbort(ctx) // as Java's close: abort a transaction left open
	}
	p.snd.startClosing()
	p.snd.wake()
	select {
	case <-p.snd.done:
	case <-ctx.Done():
		p.forceClose()
		<-p.snd.done
		// (forcedFails is the sender's, read once it has ended.) With
		// nothing left to deliver, as after a Flush, an ended ctx costs
		// nothing, as Java's close(Duration.ZERO) then throws nothing.
		if p.snd.forcedFails > 0 {
			p.closeErr = fmt.Errorf("close: %w: its ctx ended first (%w), and the records not yet delivered failed; give Close a longer ctx to let them finish", kerr.ErrAborted, ctx.Err())
		}
	}
	p.finishClose()
}

// forceClose makes the sender fail what is left and stop, and ends the
// requests it waits on (an InitProducerId) at once.
func (p *Producer) forceClose() {
	close(p.snd.force)
	p.snd.forceCancel()
	p.snd.wake()
}

// finishClose is the end of Close, once the sender has ended.
func (p *Producer) finishClose() { p.finishCloseThen(nil) }

// finishCloseThen is finishClose, calling before (if set) just before it
// lets other Closes return.
func (p *Producer) finishCloseThen(before func()) {
	p.pluginCloser.Store(goroutineID())
	p.cl.Close()
	// The sender has ended, so every OnAcknowledgement of a buffered
	// record has run: the interceptors can let go of their state.
	p.closeInterceptors()
	// Then the partitioner, as Java's close does; Send no longer calls it.
	if c, ok := p.cfg.Partitioner.(io.Closer); ok {
		p.closeOne("partitioner", c)
	}
	if before != nil {
		before()
	}
	close(p.closeDone)
}

// compressionLevel is the configured level of codec.
func (c *Config) compressionLevel(codec recbatch.Codec) int {
	switch codec {
	case recbatch.Gzip:
		return c.CompressionGzipLevel
	case recbatch.LZ4:
		return c.CompressionLz4Level
	case recbatch.Zstd:
		return c.CompressionZstdLevel
	}
	return 0
}
