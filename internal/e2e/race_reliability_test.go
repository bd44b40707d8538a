//go:build race

package e2e

// raceEnabled scales the load tests down: the race detector makes every
// call several times slower, and CI runs with it.
const raceEnabled = true
