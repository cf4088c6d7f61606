package kprod

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kprod/kprod/internal/cluster"
	"github.com/kprod/kprod/internal/recbatch"
	"github.com/kprod/kprod/kerr"
)

// accumulator is the seeds' RecordAccumulator: per partition, a deque of
// batches. Send appends to the last batch of its partition under that
// partition's lock only; the sender takes batches from the front.
//
// Lock order: bufferPool.mu is a leaf (an append gives memory back only
// after dropping partq.mu); accumulator.mu (the registries) is never held
// while taking a partq.mu.
type accumulator struct {
	pool      *bufferPool
	batchSize int
	// stickyBytes is the sticky partitioner's batch.size (Java's
	// stickyBatchSize): what goes to a partition before it may switch.
	stickyBytes int
	lingerNs    int64
	codecOpts   recbatch.SealOptions // compression for sealing; sequence fields unused
	compressed  bool                 // codecOpts compresses: batches are sized by estimate

	mu     sync.Mutex                             // serializes registry updates
	topics atomic.Pointer[map[string]*topicState] // copy on write
	parts  atomic.Pointer[[]*partq]               // every queue, for the sender; copy on write
	last   atomic.Pointer[topicState]             // the topic of the last topic() call

	// incomplete is every batch created and not yet completed, for
	// Flush and Close (the Java client's IncompleteBatches).
	incMu      sync.Mutex
	incomplete map[*batch]struct{}

	flushes atomic.Int32 // flushes in progress: linger is skipped while > 0

	// closed refuses appends from Close on. It is read under partq.mu,
	// as Java's RecordAccumulator reads its closed flag under the
	// deque's lock: so close, which sets it and then takes every
	// partq.mu once, knows that every append is either in its deque or
	// refused, without Send taking any other lock.
	closed atomic.Bool

	// testAfterAllocate, when set (tests only), runs between a new
	// batch's allocation and its append.
	testAfterAllocate func()

	released []*batch // released, to be recycled; sender goroutine only
	wake     func()   // wakes the sender; must not block
}

// topicState is what Send needs per topic, found with one map load.
type topicState struct {
	name  string
	use   atomic.Pointer[cluster.Use] // keeps the topic in metadata requests
	parts atomic.Pointer[[]*partq]    // by partition id; grows with the topic

	metrics topicMetrics

	// meta caches the topic's entry of one metadata snapshot, so that
	// Send looks the name up once per snapshot, not once per record.
	meta atomic.Pointer[topicSnap]

	// splitWarned is when a split of one of the topic's batches was last
	// logged as a warning (split.go); sender goroutine only.
	splitWarned time.Time
	// tooLarge records attempts the brokers refused as too large: the
	// earliest sent, and the smallest (split.go, sender.maySplit).
	// Sender goroutine only.
	tooLarge struct{ earliest, smallest refusal }

	// ratio is the topic's estimated compression ratio (float32 bits;
	// 0 until the first compressed batch is sealed, which means 1): the
	// Java client's CompressionRatioEstimator. Written by the sender
	// after each seal, read when a batch starts.
	ratio atomic.Uint32

	// sticky is the sticky partition and the bytes appended to it
	// (partitioner.go), written by every Send of a record without a key:
	// on a cache line of its own, away from the metrics the sender
	// updates.
	_      cacheLinePad
	sticky atomic.Uint64
	_      cacheLinePad
}

// compressionEstimate is the ratio that the topic's next batch expects its
// records to compress to.
func (t *topicState) compressionEstimate() float32 {
	if bits := t.ratio.Load(); bits != 0 {
		return math.Float32frombits(bits)
	}
	return 1
}

// Java's CompressionRatioEstimator steps: an estimate follows a batch
// that compressed worse at once (at least by deteriorateStep), and one that
// compressed better only slowly (by improvingStep a batch), so that the
// next batches seldom come out larger than batch.size.
const (
	compressionImprovingStep   = 0.005
	compressionDeteriorateStep = 0.05
)

// observeCompression feeds a sealed batch's compression ratio into the
// topic's estimate, as Java's updateEstimation does. Sender goroutine
// only.
func (t *topicState) observeCompression(observed float32) {
	est := t.compressionEstimate()
	switch {
	case observed > est:
		est = max(est+compressionDeteriorateStep, observed)
	case observed < est:
		est = max(est-compressionImprovingStep, observed)
	default:
		return
	}
	t.ratio.Store(math.Float32bits(est))
}

// cacheLinePad separates fields that different goroutines write often.
type cacheLinePad [64]byte

type topicSnap struct {
	snap *cluster.Snapshot
	t    *cluster.Topic
}

// touch keeps the topic in metadata requests (metadata.max.idle.ms).
func (t *topicState) touch(now time.Time) {
	if u := t.use.Load(); u != nil {
		u.Touch(now.UnixNano())
	}
}

// metadata returns the topic's entry in snap (nil if it has none).
func (t *topicState) metadata(snap *cluster.Snapshot) *cluster.Topic {
	if m := t.meta.Load(); m != nil && m.snap == snap {
		return m.t
	}
	mt := snap.Topics[t.name]
	t.meta.Store(&topicSnap{snap: snap, t: mt})
	return mt
}

// partq is one partition's deque of batches.
type partq struct {
	topic     *topicState
	partition int32

	// topic and partition are read by every goroutine; the fields below
	// are written for every record, so they start a cache line of their
	// own.
	_       cacheLinePad
	mu      sync.Mutex
	batches []*batch // front is [0]; guarded by mu
	nextID  uint64   // creation order of batches; guarded by mu
	// lastRaw is the uncompressed size of the partition's last
	// batch.size batch with compression (0 before the first): set by the
	// Send that finds it full, or by the sender when it seals one that
	// was not; read by the Send that opens the next batch, to size its
	// buffer (newBatchSize). Written once or twice per batch.
	lastRaw atomic.Int64

	// The fields above are written by Send for every record, those below
	// by the sender for every batch: on separate cache lines, so that
	// neither side's writes evict what the other is using.
	_ cacheLinePad

	// Owned by the sender goroutine.
	inflight int // batches of this partition in flight
	// splitting counts the parts of split batches (split.go) not yet
	// complete; while there are any, the partition sends one batch at a
	// time, so that a part refused again cannot fall behind later records.
	splitting  int
	nextSeq    int64    // idempotence: sequence of the next new batch (not wrapped: see wireSeq)
	lastAcked  int64    // idempotence: last sequence acknowledged, -1 none
	suspectEnd int64    // idempotence: a failed batch ended here, -1 none
	ackedPID   int64    // idempotence: a batch of this producer id was acknowledged here (in any epoch), else -1
	pending    []*batch // idempotence: batches with a sequence, not yet completed, by sequence
	// parked: batches done with the broker whose callbacks wait for an
	// older batch of the partition to complete, oldest first: acknowledged
	// while an older one is unsettled (sender.succeed), or failed for good
	// while an older one is still under way (sender.failInOrder).
	parked []parkedAck
	// idempotence: the producer id and epoch the sequences are numbered
	// in (-1 before the first batch), and whether the partition waits
	// for an epoch bump to renumber its batches.
	pid     int64
	epoch   int16
	rewrite bool

	// txnGen is the transaction (v1) this partition was added to with
	// AddPartitionsToTxn; set by the goroutine that adds it, read by the
	// sender.
	txnGen atomic.Uint64
}

// batch is the seeds' ProducerBatch: a pooled buffer being filled in
// record-batch v2 format, the records' callbacks, and delivery state.
type batch struct {
	q       *partq
	id      uint64
	bld     recbatch.Builder
	memSize int // bytes charged to the pool
	// limit is the batch's size limit (batch.size, or one larger record):
	// TryAppend's and IsFull's limit, for the estimated size on the wire.
	// It is memSize except for compressed batches (newBatchSize).
	limit int
	// maxRecSize and sumRecSize are the largest and the total size of
	// the records appended (Java's upper-bound estimate, as its
	// record-size metrics use); written under q.mu while the batch takes
	// records.
	maxRecSize, sumRecSize int
	recs                   []pending
	created                time.Time
	// full: no more appends; set under q.mu by the append it refused
	// (tryAppendLocked) or that started the next batch, or by the
	// sender when it drains it.
	full bool

	// Sender-owned state below. attempts and retryAt are also read by
	// Send's adaptive partitioner (partq.queueState, under q.mu) while the
	// batch waits in its deque: the sender writes them before requeue,
	// or under q.mu.
	wire     []byte // the sealed batch; nil until drained the first time
	attempts int
	seq      int64 // idempotence: base sequence (not wrapped: see wireSeq), noSeq until first drained
	// renumbered: the batch's sequence was restarted by an epoch bump
	// (Java's sequenceHasBeenReset).
	renumbered bool
	// recErrs are the records the broker named as invalid when it
	// refused the batch (by index), for their callbacks.
	recErrs map[int32]error
	// leaderEpoch is the partition's leader epoch in the metadata the
	// batch was last sent by: the callback's LeaderEpoch, the epoch the
	// record was written under, even if leadership moved since.
	leaderEpoch int32
	sent        bool  // written to a broker at least once
	sends       int   // how many times it was written (for errors)
	lastErr     error // of the last failed attempt
	retryAt     time.Time
	inFlight    bool // in a request not yet answered
	completed   bool // callbacks have run
	acked       bool // idempotence: counted as acknowledged; its callbacks wait (sender.succeed)
	seqDone     bool // idempotence: failed, its sequences settled; its callbacks wait (sender.failInOrder)
	// maybeWrittenAt: when the first attempt that ended without saying
	// the batch was not written (the request failed, REQUEST_TIMED_OUT,
	// ...) was sent; zero if none did. See sender.maySplit.
	maybeWrittenAt time.Time
	// parent is the batch this one is a part of (split.go); outstanding
	// counts the parts of a split batch not yet complete. A split batch
	// stays incomplete, for Flush, until its last part completes.
	parent      *batch
	outstanding int
	// aborted: failed by an abort (of the transaction, after a fatal
	// error, by a forced Close), which Java's metrics do not count as a
	// record error. Sender goroutine only.
	aborted bool
	// done is closed when every callback has run; made only for a
	// Flush that waits for the batch. Guarded by accumulator.incMu.
	done chan struct{}
}

type pending struct {
	rec *Record
	cb  func(*Record, error)
}

func newAccumulator(pool *bufferPool, batchSize int, linger time.Duration, seal recbatch.SealOptions, wake func()) *accumulator {
	a := &accumulator{pool: pool, batchSize: batchSize, lingerNs: int64(linger), codecOpts: seal, wake: wake,
		stickyBytes: min(max(batchSize, 1), maxStickyBatchSize),
		compressed:  seal.Compressor != nil && seal.Compressor.Codec() != recbatch.None,
		incomplete:  map[*batch]struct{}{}}
	a.topics.Store(&map[string]*topicState{})
	a.parts.Store(&[]*partq{})
	return a
}

// topic returns the state of a topic, creating it on first use. The
// topic of the previous call is checked first: most producers send to one
// topic, and comparing a name costs less than hashing it.
func (a *accumulator) topic(name string) *topicState {
	if t := a.last.Load(); t != nil && t.name == name {
		return t
	}
	if t := (*a.topics.Load())[name]; t != nil {
		a.last.Store(t)
		return t
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	old := *a.topics.Load()
	if t := old[name]; t != nil {
		return t
	}
	t := &topicState{name: name}
	t.parts.Store(&[]*partq{})
	m := make(map[string]*topicState, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[name] = t
	a.topics.Store(&m)
	return t
}

// queue returns the deque of a partition, creating it on first use.
func (a *accumulator) queue(t *topicState, partition int32) *partq {
	if ps := *t.parts.Load(); int(partition) < len(ps) && ps[partition] != nil {
		return ps[partition]
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	old := *t.parts.Load()
	if int(partition) < len(old) && old[partition] != nil {
		return old[partition]
	}
	ps := make([]*partq, max(len(old), int(partition)+1))
	copy(ps, old)
	q := &partq{topic: t, partition: partition, lastAcked: -1, suspectEnd: -1, pid: -1, epoch: -1, ackedPID: -1}
	ps[partition] = q
	// The sender walks a.parts: q must be there before another Send can
	// find it through t.parts (the fast path above), append and wake the
	// sender, or that wake-up finds nothing to send.
	all := append(append([]*partq{}, *a.parts.Load()...), q)
	a.parts.Store(&all)
	t.parts.Store(&ps)
	return q
}

// recSizes is what Send works out once of a record's size, for every
// use the accumulator has for it.
type recSizes struct {
	fields int // recbatch.FieldsSize of its key, value and headers
	alone  int // exact size of a batch holding only this record
}

// newRecSizes sizes a record with key, value and headers.
func newRecSizes(key, value []byte, headers []Header) recSizes {
	f := recbatch.FieldsSize(key, value, headers)
	return recSizes{fields: f, alone: recbatch.RecordSizeFields(0, 0, f) + recbatch.HeaderSize}
}

// rec is the record's own size in a batch (with deltas of 0).
func (s recSizes) rec() int { return s.alone - recbatch.HeaderSize }

// append adds one record to its partition's last batch, or to a new one
// when it does not fit; a new batch may wait for memory (up to maxBlock).
// The record is encoded into the batch buffer here, on the caller's
// goroutine, so the sender only has to seal. The result tells the sticky
// partitioner what the record did to its batch.
//
// A sticky record whose partition must switch gets errSwitchSticky, also
// after it waited for memory (others may have moved the sticky partition
// meanwhile: Java's second partitionChanged); the memory it got then is
// kept in held for the append to the next partition, as Java keeps its
// buffer. held must be empty when append returns anything else.
func (a *accumulator) append(ctx context.Context, q *partq, r *Record, ts int64, cb func(*Record, error), sz recSizes, maxBlock time.Duration, sticky bool, held *heldBuf) (appendResult, error) {
	ok, full, grown, err := a.tryAppend(q, r, ts, cb, sz, sticky)
	if err != nil {
		if err != errSwitchSticky {
			a.releaseHeld(held)
		}
		return appendResult{}, err
	}
	if ok {
		a.releaseHeld(held)
		if full {
			a.wake() // it can go now: see the sender's sendable
		}
		return appendResult{lastFull: full, appended: grown}, nil
	}
	if full {
		// The last batch refused the record and tryAppendLocked closed
		// it: it can go now, while this append may wait for memory or
		// leave for another partition.
		a.wake()
	}
	// sz.alone is exact for a batch's first record (header included), so
	// a batch of one record larger than batch.size is full at once.
	limit := max(a.batchSize, sz.alone)
	size, ratio := a.newBatchSize(q, limit)
	want := size
	var buf []byte
	if held.buf != nil && held.size >= limit {
		// Always, as Java keeps its buffer: it was sized for this very
		// record, rather than wait for memory again.
		buf, size = held.buf, held.size
		*held = heldBuf{}
	} else {
		a.releaseHeld(held)
		if size > limit {
			// A Send from a callback cannot wait for memory: if the
			// grown buffer a compressed batch wants is not free, it
			// takes the largest that is (batch.size at least, the
			// memory of the batch whose callbacks run).
			size = a.pool.fitNow(size, limit)
		}
		if buf, err = a.pool.allocate(ctx, size, maxBlock); err != nil {
			return appendResult{}, err
		}
	}
	if size < want {
		// The partition's estimate wants a larger buffer: the batch
		// fills by what this one holds, as when newBatchSize caps it.
		ratio = max(ratio, recbatch.EstimateForCapacity(limit, size))
	}
	if a.testAfterAllocate != nil {
		a.testAfterAllocate()
	}
	q.mu.Lock()
	if a.closed.Load() {
		q.mu.Unlock()
		a.pool.release(buf, size)
		return appendResult{}, errAppendClosed
	}
	if sticky && a.stickySwitchDueLocked(q) {
		q.mu.Unlock()
		*held = heldBuf{buf: buf, size: size}
		return appendResult{}, errSwitchSticky
	}
	if ok, full, grown := a.tryAppendLocked(q, r, ts, cb, sz); ok {
		// Another sender made room meanwhile.
		q.mu.Unlock()
		a.pool.release(buf, size)
		if full {
			a.wake()
		}
		return appendResult{lastFull: full, appended: grown}, nil
	}
	first := len(q.batches) == 0
	if !first {
		q.batches[len(q.batches)-1].full = true
	}
	// Room for the callbacks of a batch of records like this one, so that
	// the slice does not grow record by record.
	b := newBatch(q, q.nextID, size, max(size/max(sz.rec(), 1), 1))
	b.limit = limit
	q.topic.touch(b.created)
	q.nextID++
	b.bld.Reset(buf, ts)
	b.bld.SetCompressionEstimate(ratio)
	b.bld.Append(ts, r.Key, r.Value, r.Headers)
	b.recs = append(b.recs, pending{rec: r, cb: cb})
	b.maxRecSize = sz.rec()
	b.sumRecSize = b.maxRecSize
	lastFull := b.bld.IsFull(b.limit)
	grown = b.bld.Size()
	// Registered before the batch is visible to the sender, so that it
	// cannot complete (and be removed) before it is added.
	a.incMu.Lock()
	a.incomplete[b] = struct{}{}
	a.incMu.Unlock()
	q.batches = append(q.batches, b)
	q.mu.Unlock()
	// A new first batch starts a linger timer; a new second batch means
	// the one before is full and ready now. Either way the sender must
	// look again; appends into an existing batch need a wake-up only when
	// they fill it.
	a.wake()
	return appendResult{lastFull: lastFull, appended: grown}, nil
}

// heldBuf is memory an append got from the pool for a partition that it
// then had to leave (errSwitchSticky), kept for the next one.
type heldBuf struct {
	buf  []byte
	size int // charged to the pool
}

// releaseHeld gives back what held holds, if anything.
func (a *accumulator) releaseHeld(held *heldBuf) {
	if held.buf != nil {
		a.pool.release(held.buf, held.size)
		*held = heldBuf{}
	}
}

// appendResult is what an append did to its partition's batches (Java's
// RecordAppendResult, as far as the sticky partitioner needs it).
type appendResult struct {
	// lastFull: the batch the record went into takes no more records
	// (Java's allBatchesFull, for the partition's last batch).
	lastFull bool
	// appended is what the record added to its batch's estimated size
	// (Builder.Size: with compression, the estimated compressed bytes),
	// the batch header too when it opened the batch: Java's
	// RecordAppendResult.appendedBytes, which the sticky partitioner
	// counts.
	appended int
}

// newBatchSize is the buffer a new batch of limit bytes (batch.size, or
// one larger record) takes from the pool, and the compression estimate
// it appends with. Without compression both are plain: limit, and no
// estimate. With compression, as in the Java client, a batch is full when
// its records are estimated to compress to batch.size, using the topic's
// running compression ratio (1 until batches were sealed); kprod keeps the
// records uncompressed until the seal, so the buffer must hold more than
// batch.size of them: the next pooled size that does (batch.size × 2, 4,
// 8, 16; never more than buffer.memory), with the estimate raised to what
// that buffer can hold when even that is not enough. buffer.memory thus
// bounds the uncompressed bytes kprod holds.
//
// The buffer grows no larger than twice what the partition's last batch
// held (batch.size for its first): a partition whose batches leave by
// linger.ms after a few records does not tie up 16 × batch.size of
// buffer.memory per open batch (with keyed records over hundreds of
// partitions that would be all of it), while one whose batches fill
// doubles its buffer batch by batch up to what the estimate asks.
func (a *accumulator) newBatchSize(q *partq, limit int) (size int, ratio float32) {
	if !a.compressed {
		return limit, 0
	}
	if limit != a.batchSize {
		// One record larger than batch.size, in a buffer of its exact
		// size: room for the codec's worst case, so that the seal
		// does not move the batch out of the memory charged for it.
		// (Not above buffer.memory: the seal then moves it, rather
		// than the record failing.)
		size = max(limit, a.codecOpts.Compressor.BatchBound(limit))
		if int64(size) > a.pool.total {
			size = max(limit, int(a.pool.total))
		}
		return size, 0
	}
	ratio = q.topic.compressionEstimate()
	want := recbatch.RecordsCapacity(limit, ratio)
	grow := int(min(2*q.lastRaw.Load(), int64(want)))
	size = limit
	for c := 1; c < poolClasses && size < grow && int64(limit<<c) <= a.pool.total; c++ {
		size = limit << c
	}
	if size < want { // capped at 16 × batch.size, or by buffer.memory
		ratio = max(ratio, recbatch.EstimateForCapacity(limit, size))
	}
	return size, ratio
}

// tryAppend appends r to q's last batch if it fits, and says by how much
// the batch grew (lastFull as tryAppendLocked's). err is errSwitchSticky
// or errAppendClosed when it did not try.
func (a *accumulator) tryAppend(q *partq, r *Record, ts int64, cb func(*Record, error), sz recSizes, sticky bool) (ok, lastFull bool, grown int, err error) {
	q.mu.Lock()
	if a.closed.Load() {
		q.mu.Unlock()
		return false, false, 0, errAppendClosed
	}
	if sticky && a.stickySwitchDueLocked(q) {
		q.mu.Unlock()
		return false, false, 0, errSwitchSticky
	}
	ok, lastFull, grown = a.tryAppendLocked(q, r, ts, cb, sz)
	q.mu.Unlock()
	return ok, lastFull, grown, nil
}

// close refuses appends from now on and returns once every append
// under way is in its deque or refused (errAppendClosed). A partq made
// after parts is read here is made after closed is set, so its appends
// see closed (the atomics are sequentially consistent).
func (a *accumulator) close() {
	a.closed.Store(true)
	for _, q := range *a.parts.Load() {
		q.mu.Lock()
		q.mu.Unlock() //nolint:staticcheck // empty critical section: waits out an append under way
	}
}

// errAppendClosed is what an append finds once Close has begun; Send
// reports it wrapped.
var errAppendClosed = fmt.Errorf("%w: Close began while this Send was buffering the record", kerr.ErrClosed)

// errSwitchSticky tells Send to move the sticky partition on before it
// appends; never returned to a user.
var errSwitchSticky = errors.New("kprod: the sticky partition must switch before this append")

// stickySwitchDueLocked is Java's RecordAccumulator.partitionChanged,
// under q.mu like the append that follows it: the topic's sticky
// partition is no longer q's (another Send switched it), or batch.size
// bytes went to q and no batch of it takes records any more (none is
// queued, or the last is full: allBatchesFull), say because linger.ms
// sent its last batch before it filled. One atomic load when neither.
func (a *accumulator) stickySwitchDueLocked(q *partq) bool {
	cur, produced := stickyUnpack(q.topic.sticky.Load())
	if cur != q.partition {
		return true
	}
	if produced < a.stickyBytes {
		return false
	}
	n := len(q.batches)
	return n == 0 || q.batches[n-1].full || q.batches[n-1].bld.IsFull(q.batches[n-1].limit)
}

// tryAppendLocked appends r to q's last batch if it takes it. ok false
// with lastFull means the last batch refused r and is closed now, so
// the caller must wake the sender; ok false alone means there was no
// batch open for appends.
func (a *accumulator) tryAppendLocked(q *partq, r *Record, ts int64, cb func(*Record, error), sz recSizes) (ok, lastFull bool, grown int) {
	n := len(q.batches)
	if n == 0 {
		return false, false, 0
	}
	b := q.batches[n-1]
	if b.full {
		return false, false, 0
	}
	before := b.bld.Size()
	if !b.bld.TryAppendSized(ts, r.Key, r.Value, r.Headers, sz.fields, b.limit) {
		// Closed for appends, as Java's tryAppend closes a batch that
		// refused a record: it is sendable now, and the sticky
		// partitioner's allBatchesFull sees it full, so the switch
		// comes at this batch boundary rather than after one more
		// batch of a record or two (stickySwitchDueLocked). Whoever
		// called sees ok false with lastFull and wakes the sender.
		b.full = true
		if a.compressed && b.limit == a.batchSize {
			// Full: it sizes the partition's next buffer (newBatchSize),
			// which is taken now, before the sender seals this one.
			q.lastRaw.Store(int64(b.bld.UncompressedSize()))
		}
		return false, true, 0
	}
	b.recs = append(b.recs, pending{rec: r, cb: cb})
	b.maxRecSize = max(b.maxRecSize, sz.rec())
	b.sumRecSize += sz.rec()
	return true, b.bld.IsFull(b.limit), b.bld.Size() - before
}

// snapshotIncomplete returns the done channels of every batch not yet
// completed, for Flush. A batch gets its channel only when a Flush asks.
func (a *accumulator) snapshotIncomplete() []chan struct{} {
	a.incMu.Lock()
	defer a.incMu.Unlock()
	out := make([]chan struct{}, 0, len(a.incomplete))
	for b := range a.incomplete {
		if b.done == nil {
			b.done = make(chan struct{})
		}
		out = append(out, b.done)
	}
	return out
}

func (a *accumulator) hasIncomplete() bool {
	a.incMu.Lock()
	defer a.incMu.Unlock()
	return len(a.incomplete) > 0
}

// finish marks a batch complete (its callbacks have run) for Flush, and
// the batch it is the last outstanding part of, if any (split.go).
func (a *accumulator) finish(b *batch) {
	a.incMu.Lock()
	for b != nil {
		delete(a.incomplete, b)
		if b.done != nil {
			close(b.done)
		}
		if b = b.parent; b != nil {
			if b.outstanding--; b.outstanding > 0 {
				break
			}
		}
	}
	a.incMu.Unlock()
}

// release returns a completed batch's buffer to the pool; the batch must
// not be in flight any more. The batch itself is recycled later, by
// recycle: the sender may still look at it until its loop comes round.
// Sender goroutine only.
func (a *accumulator) release(b *batch) {
	a.pool.release(b.bld.Release(), b.memSize)
	b.wire = nil
	a.released = append(a.released, b)
}

// recycle hands the batches released since the last call to batchPool.
// The sender calls it at the top of its loop, when it holds no batch.
func (a *accumulator) recycle() {
	for i, b := range a.released {
		// Keep the callback slice (complete cleared every entry) and the
		// Builder.
		*b = batch{recs: b.recs[:0], bld: b.bld}
		batchPool.Put(b)
		a.released[i] = nil
	}
	a.released = a.released[:0]
}

// batchPool recycles batches with their callback slices: a batch of
// small records holds a slice of a few kilobytes, which would otherwise
// be allocated (and zeroed) anew for every batch.
var batchPool = sync.Pool{New: func() any { return new(batch) }}

// newBatch returns an empty batch of q with the given id, created now and
// charged memSize bytes, with room for about recs callbacks.
func newBatch(q *partq, id uint64, memSize, recs int) *batch {
	b := batchPool.Get().(*batch)
	b.q, b.id, b.seq, b.memSize, b.limit, b.created = q, id, noSeq, memSize, memSize, time.Now()
	if cap(b.recs) < recs {
		b.recs = make([]pending, 0, recs)
	}
	return b
}
