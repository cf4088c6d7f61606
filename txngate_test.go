package kprod

import (
	"context"
	"errors"
	"testing"
	"time"
)

// appendGate: a writer waiting keeps new readers out (but for
// TryRLockUnlessHeld); one that gives up when its ctx ends leaves nothing
// behind; readers and writers exclude each other.
func TestAppendGate(t *testing.T) {
	var g appendGate
	g.RLock(context.Background()) // a Send waiting for memory

	ctx, cancel := context.WithCancel(context.Background())
	locked := make(chan error, 1)
	go func() { locked <- g.Lock(ctx) }()
	waitUntil(t, "the writer to wait", func() bool { return gateWaiting(&g) == 1 })
	if g.TryRLock() {
		t.Fatal("a reader got in while a writer waited")
	}
	if !g.TryRLockUnlessHeld() { // a Send on the sender goroutine
		t.Fatal("TryRLockUnlessHeld refused while a writer only waited")
	}
	g.RUnlock()
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer rcancel()
	if err := g.RLock(rctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RLock while a writer waited, its ctx ended: %v, want its deadline", err)
	}
	cancel()
	if err := <-locked; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with its ctx ended: %v, want context.Canceled", err)
	}
	if !g.TryRLock() {
		t.Fatal("after the writer gave up, a reader is still kept out")
	}
	g.RUnlock()

	go func() { locked <- g.Lock(context.Background()) }()
	waitUntil(t, "the writer to wait", func() bool { return gateWaiting(&g) == 1 })
	readerIn := make(chan struct{})
	go func() {
		g.RLock(context.Background()) // waits for the writer, then for its Unlock
		close(readerIn)
	}()
	select {
	case err := <-locked:
		t.Fatalf("the writer got in while a reader held the gate: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.RUnlock() // the first reader leaves: the writer goes first
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	if g.TryRLockUnlessHeld() {
		t.Fatal("TryRLockUnlessHeld got in while a writer held the gate")
	}
	select {
	case <-readerIn:
		t.Fatal("a reader got in while the writer held the gate")
	case <-time.After(50 * time.Millisecond):
	}
	g.Unlock()
	select {
	case <-readerIn:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not get in after the writer left")
	}
	g.RUnlock()
}

// gateWaiting is how many writers wait for g.
func gateWaiting(g *appendGate) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// gateReadersWaiting is how many readers wait for g.
func gateReadersWaiting(g *appendGate) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rwait
}
