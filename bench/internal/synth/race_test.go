//go:build race

package synth

// raceEnabled says the race detector, which allocates on its own, is on.
const raceEnabled = true
