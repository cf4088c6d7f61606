// Package live counts the goroutines that kprod starts, so that tests can
// check that a Close returned only after every one of them ended.
//
// A goroutine is counted from just before its go statement (Go) until
// Done, which it calls as its last act before the signal its owner's
// Close waits for (a WaitGroup's Done, a closed channel): defer Done after
// deferring that signal, so that it runs first. So once Close returns,
// Count is back to what it was before the owner started, at once: a test
// need not wait, and a Close that does not wait for a goroutine is seen
// even when that goroutine would end a moment later.
package live

import "sync/atomic"

var n atomic.Int64

// Go counts a goroutine about to start.
func Go() { n.Add(1) }

// Done uncounts the calling goroutine, which is about to end.
func Done() { n.Add(-1) }

// Count is how many counted goroutines have not called Done.
func Count() int64 { return n.Load() }
