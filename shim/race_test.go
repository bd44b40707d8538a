//go:build race

package shim

// raceEnabled says the race detector, which allocates on its own, is on.
const raceEnabled = true
