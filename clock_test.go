package kprod

import (
	"testing"
	"time"
)

func TestClockFollowsTimeNow(t *testing.T) {
	var c clock
	for i := 0; i < 3; i++ {
		before := time.Now()
		got := c.now()
		after := time.Now()
		// Derived readings stay between two real ones, wall and monotonic.
		if got.Before(before) || got.After(after) {
			t.Fatalf("clock.now() = %v, not between %v and %v", got, before, after)
		}
		if w := got.UnixNano(); w < before.UnixNano()-int64(time.Millisecond) || w > after.UnixNano()+int64(time.Millisecond) {
			t.Fatalf("wall clock of clock.now() = %d, not between %d and %d", got.UnixNano(), before.UnixNano(), after.UnixNano())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestClockRebasesAfterASecond(t *testing.T) {
	var c clock
	old := time.Now().Add(-2 * rebaseAfter)
	c.base.Store(&old)
	before := time.Now()
	got := c.now()
	if got.Before(before) {
		t.Fatalf("clock.now() = %v kept a base older than %v", got, rebaseAfter)
	}
	if b := c.base.Load(); b.Before(before) {
		t.Fatalf("the base was not refreshed: %v", b)
	}
}
