package recbatch

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// The CPUID check must agree with the kernel's: a CPU that lacks
// PREFETCHW must never be given it, and one that has it should use it.
func TestHasPrefetchWMatchesKernel(t *testing.T) {
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatalf("reading /proc/cpuinfo: %v", err)
	}
	kernel := false
	for line := range strings.Lines(string(info)) {
		if name, flags, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "flags" {
			kernel = slices.Contains(strings.Fields(flags), "3dnowprefetch")
			break
		}
	}
	if hasPrefetchW != kernel {
		t.Fatalf("hasPrefetchW = %v, but /proc/cpuinfo's flags say 3dnowprefetch = %v", hasPrefetchW, kernel)
	}
}

// A prefetch for writing changes nothing in memory: bytes prefetched
// ahead of the appends, up to the end of the buffer, read back as they
// were written.
func TestPrefetchWriteLeavesBytes(t *testing.T) {
	buf := make([]byte, 1024)
	for i := range buf {
		buf[i] = byte(i)
	}
	for off := 0; off+128 <= len(buf); off += 64 {
		prefetchWrite(buf, off)
	}
	for i, c := range buf {
		if c != byte(i) {
			t.Fatalf("byte %d is %d after the prefetches, want %d", i, c, byte(i))
		}
	}
}
