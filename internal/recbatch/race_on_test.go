//go:build race

package recbatch

const raceEnabled = true
