package recbatch

// Prefetch asks the CPU to bring b's first cache lines and its last one
// into its caches, without waiting for them: Send calls it on the value
// first thing, so that a value not in cache (built a while ago, or on
// another core) arrives while Send picks the partition, instead of
// stalling the copy into the batch. Beyond those lines, the copy's
// sequential reads are the hardware prefetcher's.
//
//go:noescape
func Prefetch(b []byte)
