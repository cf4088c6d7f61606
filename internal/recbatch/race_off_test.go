//go:build !race

package recbatch

const raceEnabled = false
