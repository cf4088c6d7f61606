//go:build !unix

package kprod

import "time"

// processCPU is not measured here; the benchmark's cpu-ns/op reads 0.
func processCPU() time.Duration { return 0 }
