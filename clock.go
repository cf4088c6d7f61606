package kprod

import (
	"sync/atomic"
	"time"
)

// clock tells the time on the send path with one monotonic clock read
// instead of time.Now's two (wall and monotonic), which on virtual
// machines cost 50 ns or more each and were the largest single item in
// Send's profile. It derives the wall clock from a base reading that is
// refreshed once a second, so a step of the system clock shows within a
// second; NTP's slewing moves both clocks alike.
type clock struct {
	base atomic.Pointer[time.Time] // a time.Now() reading, with its monotonic part
}

// rebaseAfter is how long a base reading is trusted.
const rebaseAfter = time.Second

// now returns the current time, with a monotonic reading like time.Now's.
func (c *clock) now() time.Time {
	b := c.base.Load()
	if b != nil {
		if d := time.Since(*b); d >= 0 && d < rebaseAfter {
			return b.Add(d)
		}
	}
	t := time.Now()
	c.base.Store(&t)
	return t
}
