package synth

import (
	"bytes"
	"runtime"
	"slices"
	"strconv"
	"testing"
)

// Budgets for what serve allocates relaying one call, in process, to the
// synthetic kernel (which allocates nothing per call but the small
// things a reader of its own needs): the hot path of issue 17, pinned so
// an edit that adds to it fails here rather than passing unnoticed. The
// counts are the fewest of several runs, each averaged over many calls;
// the bytes are per call, and they are what shows a copy of a payload.
//
// Re-based with the relay's data path of issue 30 (docs/adr/0029): each
// byte of a payload is copied once out of the buffer it was read into,
// into memory its consumer owns (the kernel client's queue, the writer's
// answer), and an output is escaped once into its text block. Measured
// then: 23 allocations a small call (24 before); 22, 29 and 31 for a 4 MiB
// argument, content and output (at most 32 before); 4.2 MB a 4 MiB
// argument or content call and 9.5 MB an output call (under 256 KiB
// before, when payloads were written from the read buffers).
//
// Re-based again when readers stopped keeping the buffer a long line grew
// (docs/adr/0029, amended): a line longer than its reader's buffer is read
// into pieces and assembled, once, into a slice of its own, which is its
// consumer's (the kernel client's queue writes a stdin line's arguments
// from it; a call's answer is the kernel's line), and an output's text is
// escaped a piece at a time into a buffer the writer keeps; and the
// "2.0", a call's method and a result's status are read without a string
// made for each. Measured then: 19 allocations a small call (23 before);
// 27, 29 and 31 for a 4 MiB argument, content and output; 9.4 MB a 4 MiB
// argument call and 8.4 MB a result call of either shape: the pieces and
// the line, and no text block.
const (
	relayedCallAllocs = 19 // a small tools/call, the client's line and read included
	payloadAllocs     = 31 // a 4 MiB call of any kind
	payloadBytes      = 256 << 10
	// readPiece is the largest piece a reader reads a long line into
	// (jsonrpc's maxPiece): its last piece wastes at most that much.
	readPiece = 1 << 20
)

// payloadCopies is how many times its size a 4 MiB call may allocate,
// besides readPiece and payloadBytes: the pieces its long line is read
// into, and the line they are assembled in.
const payloadCopies = 2

// TestRelayedCallAllocsSynth guards a small call: read, relayed, answered,
// rendered and written.
func TestRelayedCallAllocsSynth(t *testing.T) {
	in, out, stop := sessionOf(t, Tools(1))
	defer stop()
	id := 0
	lines := make([][]byte, 2000)
	for i := range lines {
		lines[i] = []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) + `,"method":"tools/call","params":{"name":"` + FirstTool + `","arguments":{"query":"relay"}}}` + "\n")
	}
	call := func() {
		in.Write(lines[id])
		id++
		if line, err := out.ReadLine(); err != nil || !bytes.Contains(line, []byte(Answer)) {
			t.Fatalf("answer %.200q, %v", line, err)
		}
	}
	for range 100 {
		call()
	}
	got := fewest(5, func() float64 { return testing.AllocsPerRun(300, call) })
	t.Logf("%.0f allocations a call", got)
	if budget := budgetFor(relayedCallAllocs); got > budget {
		t.Errorf("a relayed call makes %.0f allocations, over the budget of %.0f", got, budget)
	}
}

// TestPayloadAllocsSynth guards the payload paths: a 4 MiB argument on its
// way to the kernel and a 4 MiB result in either shape on its way back
// are read into pieces and assembled once, and no more, and an output is
// escaped without a text block of its size.
func TestPayloadAllocsSynth(t *testing.T) {
	const size = 4 << 20
	payload := PayloadString(size)
	for _, kind := range []string{"argument", ShapeContent, ShapeOutput} {
		t.Run(kind, func(t *testing.T) {
			in, out, stop := sessionOf(t, PayloadTools())
			defer stop()
			id := 0
			var line []byte
			call := func() {
				id++
				if kind == "argument" {
					line = slices.Concat([]byte(`{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/call","params":{"name":"`+PayloadTool+`","arguments":{"text":`), payload, []byte("}}}\n"))
				} else {
					line = []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"` + PayloadTool + `","arguments":{"result":"` + kind + `","bytes":` + strconv.Itoa(size) + `}}}` + "\n")
				}
			}
			send := func() {
				in.Write(line)
				answer, err := out.ReadLine()
				if err != nil || bytes.Contains(answer, []byte(`"isError":true`)) || (kind != "argument" && len(answer) < size) {
					t.Fatalf("answer %.200q, %v", answer, err)
				}
			}
			for range 3 { // buffers grown, the kernel's result encoded
				call()
				send()
			}
			allocs, perCall := -1.0, -1.0
			for range 3 {
				call() // the line is the client's, made before counting
				n := testing.AllocsPerRun(1, send)
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				send()
				runtime.ReadMemStats(&after)
				b := float64(after.TotalAlloc - before.TotalAlloc)
				if allocs < 0 || n < allocs {
					allocs = n
				}
				if perCall < 0 || b < perCall {
					perCall = b
				}
			}
			t.Logf("%.0f allocations and %.0f bytes a call", allocs, perCall)
			if budget := budgetFor(payloadAllocs); allocs > budget {
				t.Errorf("a 4 MiB %s call makes %.0f allocations, over the budget of %.0f", kind, allocs, budget)
			}
			if budget := float64(payloadCopies*size + readPiece + payloadBytes); perCall > budget {
				t.Errorf("a 4 MiB %s call allocates %.0f bytes, over %.0f: the payload is copied more than once", kind, perCall, budget)
			}
		})
	}
}

// fewest is the least of n measurements: a run the scheduler or the
// garbage collector disturbs counts more, never less.
func fewest(n int, measure func() float64) float64 {
	least := measure()
	for range n - 1 {
		least = min(least, measure())
	}
	return least
}

// budgetFor is budget, with room for what the race detector allocates on
// its own.
func budgetFor(budget int) float64 {
	if raceEnabled {
		return float64(budget) * 1.5
	}
	return float64(budget)
}
