//go:build !linux

package upstream

// adoptOrphans reports that the supervisor cannot adopt the upstream's
// orphans here: only Linux has a subreaper. What leaves the upstream's
// process group outlives it.
func adoptOrphans() bool { return false }

// endAdopted has nothing to end where nothing is adopted.
func endAdopted(int) {}

// reapAdopted has nothing to reap where nothing is adopted.
func reapAdopted(int) {}
