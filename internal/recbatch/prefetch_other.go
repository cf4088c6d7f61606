//go:build !amd64

package recbatch

// Prefetch does nothing here (see prefetch_amd64.go).
func Prefetch(b []byte) {}

// prefetchWrite does nothing here (see prefetch_amd64.go).
func prefetchWrite(b []byte, off int) {}
