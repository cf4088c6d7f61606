package kprod

import (
	"context"
	"sync"
)

// appendGate is txnManager.appendMu: a readers-writer lock whose writer
// (a commit or an abort) can give up waiting when its ctx ends and leaves
// nothing behind, where a sync.RWMutex's Lock cannot be abandoned: a
// writer still queued there would keep blocking new readers (Sends of
// the transaction, which stays open) after the commit that queued it
// returned. As with sync.RWMutex, a writer waiting keeps new readers out,
// so that a stream of Sends cannot starve a commit.
type appendGate struct {
	mu      sync.Mutex
	readers int           // guarded by mu
	writer  bool          // a writer holds the gate; guarded by mu
	waiting int           // writers waiting for it; guarded by mu
	rwait   int           // readers waiting in RLock (tests read it); guarded by mu
	changed chan struct{} // closed (and replaced) when readers, writer or waiting change so that a waiter may go on (rwait changes signal nothing); guarded by mu
}

// signalLocked wakes everyone waiting for a change.
func (g *appendGate) signalLocked() {
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}

// waitLocked returns the channel closed at the next change.
func (g *appendGate) waitLocked() <-chan struct{} {
	if g.changed == nil {
		g.changed = make(chan struct{})
	}
	return g.changed
}

// TryRLock takes the gate for reading if no writer holds it or waits for
// it.
func (g *appendGate) TryRLock() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.writer || g.waiting > 0 {
		return false
	}
	g.readers++
	return true
}

// TryRLockUnlessHeld takes the gate for reading unless a writer holds it,
// ahead of writers waiting for it: for a Send on the sender goroutine,
// which cannot wait and does not hold the gate for long.
func (g *appendGate) TryRLockUnlessHeld() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.writer {
		return false
	}
	g.readers++
	return true
}

// RLock takes the gate for reading, waiting while a writer holds it or
// waits for it, or returns ctx's error, having taken nothing, if ctx ends
// first.
func (g *appendGate) RLock(ctx context.Context) error {
	g.mu.Lock()
	for g.writer || g.waiting > 0 {
		ch := g.waitLocked()
		g.rwait++
		g.mu.Unlock()
		select {
		case <-ch:
			g.mu.Lock()
			g.rwait--
		case <-ctx.Done():
			g.mu.Lock()
			g.rwait--
			g.mu.Unlock()
			return ctx.Err()
		}
	}
	g.readers++
	g.mu.Unlock()
	return nil
}

// RUnlock releases a read hold.
func (g *appendGate) RUnlock() {
	g.mu.Lock()
	g.readers--
	if g.readers == 0 {
		g.signalLocked()
	}
	g.mu.Unlock()
}

// Lock takes the gate for writing once no reader or writer holds it, or
// returns ctx's error, having changed nothing, if ctx ends first.
func (g *appendGate) Lock(ctx context.Context) error {
	g.mu.Lock()
	g.waiting++
	for g.writer || g.readers > 0 {
		ch := g.waitLocked()
		g.mu.Unlock()
		select {
		case <-ch:
			g.mu.Lock()
		case <-ctx.Done():
			g.mu.Lock()
			g.waiting--
			g.signalLocked() // readers held back by this writer go on
			g.mu.Unlock()
			return ctx.Err()
		}
	}
	g.waiting--
	g.writer = true
	g.mu.Unlock()
	return nil
}

// Unlock releases the write hold.
func (g *appendGate) Unlock() {
	g.mu.Lock()
	g.writer = false
	g.signalLocked()
	g.mu.Unlock()
}
