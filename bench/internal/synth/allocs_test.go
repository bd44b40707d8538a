package synth

import (
	"testing"

	"github.com/sharedos/sharedos-mcp/hashing"
)

// projectRawAllocs is what hashing.ProjectRaw allocates for the 512-tool
// synthetic catalogue, measured when this guard was set: five per tool
// (the one string its five text fields share, its annotations, the two
// hints read and the one the projection keeps) and seven per catalogue
// (the tools and the arena chunks the canonical schemas are written
// into). Nothing per schema key, string or number.
const projectRawAllocs = 2567

// TestProjectRawAllocs guards the catalogue projection of a first
// tools/list (docs/adr/0005): canonicalising 512 definitions allocates a
// few objects per tool, none per JSON token. The fewest of several runs
// is compared: the canonicaliser comes from a sync.Pool, which the race
// detector empties at random, and a run that finds it empty pays for
// growing its buffers again.
func TestProjectRawAllocs(t *testing.T) {
	raws := Tools(hashing.MaxTools)
	fewest := -1.0
	for range 10 {
		n := testing.AllocsPerRun(1, func() {
			if _, err := hashing.ProjectRaw(raws); err != nil {
				t.Fatal(err)
			}
		})
		if fewest < 0 || n < fewest {
			fewest = n
		}
	}
	if fewest > projectRawAllocs {
		t.Errorf("hashing.ProjectRaw of %d synthetic tools: %v allocations, want at most %d", hashing.MaxTools, fewest, projectRawAllocs)
	}
}
