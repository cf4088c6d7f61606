package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// wait returns once every record sent so far is acknowledged, whichever
// goroutine acknowledges them and whether the last one came before or
// during the wait; it counts a failure as an outcome.
func TestAckerWait(t *testing.T) {
	a := newAcker()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// All acknowledged before the wait.
	now := time.Now()
	for range 3 {
		a.sent++
		a.ack(now, nil)
	}
	if err := a.wait(ctx); err != nil {
		t.Fatalf("wait after every acknowledgement: %v", err)
	}

	// Acknowledged by another goroutine while the wait waits; one fails.
	const n = 1000
	a.sent += n
	release := make(chan struct{})
	go func() {
		<-release
		for i := range n {
			var err error
			if i == n/2 {
				err = errors.New("refused")
			}
			a.ack(now, err)
		}
	}()
	close(release)
	if err := a.wait(ctx); err != nil {
		t.Fatalf("wait while acknowledged elsewhere: %v", err)
	}
	a.mu.Lock()
	acked, failed, target := a.acked, a.failed, a.target
	a.mu.Unlock()
	if acked != 3+n || failed != 1 || target != noTarget {
		t.Errorf("after the waits: acked %d (want %d), failed %d (want 1), target %d (want none)", acked, 3+n, failed, target)
	}
}

// A wait that its ctx ends says how many records are still out.
func TestAckerWaitCtx(t *testing.T) {
	a := newAcker()
	a.sent = 5
	a.ack(time.Now(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := a.wait(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "4 records still unacknowledged") {
		t.Fatalf("wait with 4 records out: %v", err)
	}
}
