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

// hasPrefetchW reports whether the CPU has PREFETCHW (CPUID
// 0x80000001 ECX bit 8, which Linux lists as 3dnowprefetch): AMD's since
// long ago, Intel's since Broadwell. Without it the instruction is not
// issued at all.
var hasPrefetchW = cpuidPrefetchW()

func cpuidPrefetchW() bool

// prefetchWrite asks the CPU for the two cache lines at b[off:off+128]
// with the intent to write them, without waiting: the lines a batch's
// next records will be copied into. A batch buffer comes back from the
// pool after the sender and the kernel read it on another core, so a
// store into it waits for the line to be fetched and the other core's
// copy invalidated; the record's unlock, a full barrier, then waits for
// that store. Fetched a few records ahead, the lines are this core's by
// the time the copy reaches them. The caller keeps off+128 within
// cap(b): a prefetch does not fault, but a line beyond b may be another
// object's, which the other core then loses for nothing.
func prefetchWrite(b []byte, off int) {
	if hasPrefetchW {
		prefetchWriteAsm(b, off)
	}
}

//go:noescape
func prefetchWriteAsm(b []byte, off int)
