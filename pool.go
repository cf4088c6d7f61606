package kprod

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kprod/kprod/kerr"
)

// bufferPool is the seeds' BufferPool: a byte budget of buffer.memory that
// every batch buffer is charged against, plus free lists of buffers so
// that steady-state producing allocates no batch memory: of batch.size,
// and, for compressed batches, of batch.size × 2, 4, 8 and 16 (a batch of
// records that are estimated to compress to batch.size holds more than
// batch.size of them uncompressed; see accumulator.newBatchSize). A batch
// lives in its buffer until acknowledged, compressed or not (the seal
// compresses over the records, recbatch.Builder.Seal), so the budget
// bounds the memory batches really hold.
//
// Memory is counted as Java counts it: available = bytes not handed out,
// which includes the bytes held by the free lists. A buffer of another
// size is allocated fresh and, when released, dropped (not pooled); to
// make room for it, pooled buffers are dropped first, so that what is
// really allocated never exceeds the budget.
//
// When the budget is spent, allocate blocks, waiters are served in arrival
// order (a large request is not starved by a stream of small ones), and
// gives up after max.block.ms or when its ctx ends.
type bufferPool struct {
	poolable int   // batch.size
	total    int64 // buffer.memory

	mu        sync.Mutex
	available int64                 // bytes not handed out (free lists included); guarded by mu
	free      [poolClasses][][]byte // pooled buffers of batch.size << class; guarded by mu
	freeBytes int64                 // bytes in free; guarded by mu
	waiters   *list.List            // of *poolWaiter, in arrival order; guarded by mu
	closed    bool                  // guarded by mu
	held      int                   // while > 0, released memory is kept for the sender's callbacks (hold); guarded by mu
	refuse    error                 // while set, an allocation that would wait fails with it (refuseWaits); guarded by mu
	waitNs    counter               // bufferpool-wait-time-ns-total and bufferpool-wait-ratio
	exhausted counter               // buffer-exhausted-total/-rate: waits that ran out of max.block.ms

	// onWait, if set, runs (outside mu) when a Send starts waiting for
	// memory: the producer wakes its sender, which sends lingering batches
	// at once while anyone waits (see the sender's sendable). Without it a
	// sender asleep until the next linger.ms could let the wait run out.
	onWait func()

	// cannotWait, if set, reports whether the caller is the goroutine
	// that frees memory (the producer's sender, which runs the
	// callbacks): an allocation that would wait fails at once there, as
	// no memory could come free while it waited.
	cannotWait func() bool
}

// poolClasses is how many buffer sizes are pooled: batch.size << 0..4.
const poolClasses = 5

// class is the free list for buffers of size bytes, or -1 if that size is
// not pooled.
func (p *bufferPool) class(size int) int {
	for c := range poolClasses {
		if size == p.poolable<<c {
			return c
		}
	}
	return -1
}

// fitNow is, for the sender goroutine (cannotWait), the largest pooled
// size from least up to size that the pool can hand out at once, or size
// if none can (allocate then says why); for any other caller, size: it
// waits for the memory it asked for.
func (p *bufferPool) fitNow(size, least int) int {
	if p.cannotWait == nil || !p.cannotWait() {
		return size
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.available >= int64(size) {
		return size
	}
	for c := poolClasses - 1; c >= 0; c-- {
		if s := p.poolable << c; s >= least && s < size && int64(s) <= p.available {
			return s
		}
	}
	return size
}

type poolWaiter struct {
	need  int64
	ready chan struct{} // closed when the memory is reserved for this waiter
	err   error         // set before ready is closed when the pool closed
}

func newBufferPool(total int64, poolable int) *bufferPool {
	return &bufferPool{poolable: poolable, total: total, available: total, waiters: list.New()}
}

// allocate returns a buffer of len 0 and cap ≥ size, charged to the
// budget, waiting up to maxBlock for room.
func (p *bufferPool) allocate(ctx context.Context, size int, maxBlock time.Duration) ([]byte, error) {
	if int64(size) > p.total {
		return nil, fmt.Errorf("%w: a batch of %d bytes cannot fit in buffer.memory (%d bytes); raise buffer.memory or send smaller records",
			kerr.ErrRecordTooLarge, size, p.total)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, kerr.ErrClosed // the caller names the record
	}
	if p.available >= int64(size) && (p.waiters.Len() == 0 || p.held > 0 && p.cannotWait != nil && p.cannotWait()) {
		// Ahead of the waiters only for a callback's Send, from memory
		// its batch just released (hold).
		buf := p.takeLocked(size)
		p.mu.Unlock()
		return p.materialize(buf, size), nil
	}
	if err := p.refuse; err != nil {
		p.mu.Unlock()
		return nil, err
	}
	if p.cannotWait != nil && p.cannotWait() {
		free, queued := max(p.available, 0), p.waiters.Len()
		p.mu.Unlock()
		p.exhausted.add(time.Now(), 1)
		why := fmt.Sprintf("%d of buffer.memory's %d bytes are free (the rest is in use by batches not yet delivered)", free, p.total)
		if free >= int64(size) {
			why = fmt.Sprintf("the %d free bytes of buffer.memory (%d) are promised to %d Send(s) waiting for memory", free, p.total, queued)
		}
		return nil, fmt.Errorf("%w: a Send from a callback needs %d bytes and %s; it cannot wait for memory there, since callbacks run on the goroutine that frees it: send from another goroutine, or raise buffer.memory",
			kerr.ErrBufferFull, size, why)
	}
	w := &poolWaiter{need: int64(size), ready: make(chan struct{})}
	el := p.waiters.PushBack(w)
	p.mu.Unlock()
	if p.onWait != nil {
		p.onWait()
	}

	start := time.Now()
	timer := time.NewTimer(maxBlock)
	defer timer.Stop()
	var cause error
	select {
	case <-w.ready:
	case <-timer.C:
		cause = fmt.Errorf("%w: waited %v for %d bytes (buffer.memory %d bytes is in use by batches not yet delivered; is the cluster reachable? raise buffer.memory or max.block.ms)",
			kerr.ErrBufferFull, maxBlock, size, p.total)
	case <-ctx.Done():
		// Not ErrBufferFull: the caller gave up before max.block.ms.
		cause = fmt.Errorf("the Send's ctx ended while it waited %v for %d bytes of buffer memory (buffer.memory %d bytes is in use by batches not yet delivered): %w",
			time.Since(start).Round(time.Millisecond), size, p.total, ctx.Err())
	}
	now := time.Now()
	p.waitNs.add(now, int64(now.Sub(start)))
	p.mu.Lock()
	select {
	case <-w.ready:
		// Reserved (or failed) before we gave up: honour that outcome.
		cause = w.err
	default:
		p.waiters.Remove(el)
		// Our leaving may let the next waiter in (after the callbacks,
		// if the sender holds memory for them: unhold wakes then).
		if p.held == 0 {
			p.wakeLocked()
		}
	}
	if cause != nil {
		p.mu.Unlock()
		if errors.Is(cause, kerr.ErrBufferFull) {
			p.exhausted.add(time.Now(), 1)
		}
		return nil, cause
	}
	buf := p.takeReservedLocked(size)
	p.mu.Unlock()
	return p.materialize(buf, size), nil
}

// takeLocked charges size to the budget and returns a pooled buffer if
// one fits, else nil (the caller allocates outside the lock).
func (p *bufferPool) takeLocked(size int) []byte {
	p.available -= int64(size)
	return p.takeReservedLocked(size)
}

// takeReservedLocked returns a pooled buffer for memory already charged,
// dropping pooled buffers when a fresh allocation would otherwise push
// real memory over the budget.
func (p *bufferPool) takeReservedLocked(size int) []byte {
	if c := p.class(size); c >= 0 && len(p.free[c]) > 0 {
		buf := p.free[c][len(p.free[c])-1]
		p.free[c][len(p.free[c])-1] = nil
		p.free[c] = p.free[c][:len(p.free[c])-1]
		p.freeBytes -= int64(size)
		return buf
	}
	// A fresh buffer: drop pooled ones (the largest first) until what
	// they hold fits in what is still available.
	for c := poolClasses - 1; c >= 0 && p.freeBytes > p.available; {
		if n := len(p.free[c]); n > 0 {
			p.free[c][n-1] = nil
			p.free[c] = p.free[c][:n-1]
			p.freeBytes -= int64(p.poolable << c)
			continue
		}
		c--
	}
	return nil
}

func (p *bufferPool) materialize(buf []byte, size int) []byte {
	if buf != nil {
		return buf[:0]
	}
	return make([]byte, 0, size)
}

// release returns a buffer's memory (size is what was charged). A buffer
// of a pooled size goes back to its free list.
func (p *bufferPool) release(buf []byte, size int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.available += int64(size)
	if c := p.class(size); c >= 0 && buf != nil && cap(buf) == size && !p.closed {
		p.free[c] = append(p.free[c], buf[:0]) // its bytes stay counted as available
		p.freeBytes += int64(size)
	}
	if p.held == 0 {
		p.wakeLocked()
	}
}

// hold keeps the memory released from now on for the callbacks the
// sender is about to run, until unhold: a callback that sends again (a
// record refused with its batch, say) cannot wait for memory, so without
// this a Send waiting elsewhere would take its batch's memory first and
// the callback's Send would fail with ErrBufferFull. Sender goroutine
// only.
func (p *bufferPool) hold() {
	p.mu.Lock()
	p.held++
	p.mu.Unlock()
}

// unhold ends a hold and gives what the callbacks left to the waiters.
func (p *bufferPool) unhold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held--; p.held == 0 {
		p.wakeLocked()
	}
}

// wakeLocked reserves memory for waiters at the head of the queue, in
// order, while the budget allows.
func (p *bufferPool) wakeLocked() {
	for p.waiters.Len() > 0 {
		el := p.waiters.Front()
		w := el.Value.(*poolWaiter)
		if p.available < w.need {
			return
		}
		p.available -= w.need
		p.waiters.Remove(el)
		close(w.ready)
	}
}

// hasWaiters reports whether senders are blocked on memory; the sender
// then treats every batch as ready, to free memory soonest (Java's
// "exhausted").
func (p *bufferPool) hasWaiters() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiters.Len() > 0
}

// waiting is waiting-threads: the Sends waiting for memory now.
func (p *bufferPool) waiting() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int64(p.waiters.Len())
}

// availableBytes is buffer-available-bytes.
func (p *bufferPool) availableBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.available
}

// close fails every waiter with ErrClosed; later allocations fail too.
// refuseWaits fails the allocations waiting for memory with err, and
// those that would wait from now on, until allowWaits; allocations that
// find memory free still succeed. AbortTransaction uses it: the Sends of
// the transaction being aborted stop waiting (their records fail), so
// that the abort, which frees the memory, need not wait for them.
func (p *bufferPool) refuseWaits(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = err
	for p.waiters.Len() > 0 {
		w := p.waiters.Remove(p.waiters.Front()).(*poolWaiter)
		w.err = err
		close(w.ready)
	}
}

func (p *bufferPool) allowWaits() {
	p.mu.Lock()
	p.refuse = nil
	p.mu.Unlock()
}

func (p *bufferPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.free = [poolClasses][][]byte{}
	p.freeBytes = 0
	for p.waiters.Len() > 0 {
		w := p.waiters.Remove(p.waiters.Front()).(*poolWaiter)
		w.err = kerr.ErrClosed
		close(w.ready)
	}
}
