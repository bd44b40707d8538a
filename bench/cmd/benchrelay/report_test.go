package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// fakeSample is what a run might measure for a peer: every figure scaled
// by f, so that peers differ.
func fakeSample(p peer, f float64) sample {
	d := func(base time.Duration) time.Duration { return time.Duration(float64(base) * f) }
	s := sample{
		cold: d(3 * time.Millisecond), synth: callStats{p50: d(20 * time.Microsecond), p99: d(90 * time.Microsecond), rate: 80000 / f, inOrder: true},
		payload: map[payloadKey]payloadStats{}, rssLoad: map[int]int64{}, listFirst: map[int]time.Duration{},
	}
	for _, n := range payloadSizes {
		for _, k := range payloadKinds {
			if p.echo && k != argument || p.lockstep {
				continue
			}
			s.payload[payloadKey{k, n}] = payloadStats{first: d(time.Duration(n) * 4), warm: d(time.Duration(n) * 2)}
		}
		if p.command != nil && !p.lockstep {
			s.rssLoad[n] = int64(3*n) + 8<<20
		}
	}
	if p.echo || p.lockstep {
		s.coldRSS, s.coldFault = 2<<20, 200
		return s
	}
	s.coldRef, s.ref = d(4*time.Millisecond), callStats{p50: d(150 * time.Microsecond), p99: d(400 * time.Microsecond), rate: 20000 / f}
	for _, n := range catalogueSizes {
		s.listFirst[n] = d(time.Duration(n) * 20 * time.Microsecond)
	}
	s.listAgain = d(time.Millisecond)
	if p.command != nil {
		s.rssCalls, s.rssList, s.coldRSS, s.coldFault, s.listFault = 10<<20, 8<<20, 6<<20, 400, 900
	}
	return s
}

func fakeReport(keys ...string) *report {
	r := &report{opts: options{runs: 2, cold: 3, payloadReps: 2}, results: map[string][]sample{},
		loadStart: "1.00 1.00 1.00", loadEnd: "2.00 2.00 2.00", fault: 3 * time.Microsecond,
		decode: 150 * time.Millisecond, valid: 15 * time.Millisecond,
		spawns: []spawnFloor{{"/bin/true", time.Millisecond, 50}, {"gofloor", 2 * time.Millisecond, 150}, {versionFloor, 5 * time.Millisecond, 300}}}
	for i, k := range keys {
		p := peer{key: k, label: k}
		if k != "direct" {
			p.command = func(string) *exec.Cmd { return nil }
		}
		p.echo, p.lockstep = k == "echo", k == "lockstep"
		r.peers = append(r.peers, p)
		for run := range 2 {
			r.results[k] = append(r.results[k], fakeSample(p, 1+float64(i)/2+float64(run)/10))
		}
	}
	return r
}

func TestDocumentHasEveryTargetRow(t *testing.T) {
	var b bytes.Buffer
	r := fakeReport("echo", "lockstep", "direct", "minrelay", "sharedos-mcp", "gosdk", "node")
	if err := r.document(&b); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	for _, want := range []string{
		"| added latency per call, p50 | ≤ 1.5× | echo round trip |",
		"| the same | ≤ 1.1× | minimal relay's added latency |",
		"| 4 MiB argument, call to answer | ≤ 1.5× |",
		"| 4 MiB result (`content` and `output` shapes, the worse counts) | ≤ 1.5× |",
		"| pipelined calls, in order | ≥ 0.9× | minimal relay |",
		"| first `tools/list`, 512 tools (fetch, project, hash, write) | ≤ 1× |",
		"| cold start to `initialize` answered (connect, peer check, hello) | ≤ 1.5× |",
		"| the TypeScript-SDK Node peer's cold start | serve ≥ 100× faster |",
		"| peak RSS of `serve` relaying 4 MiB | ≤ 3× the payload + 12 MiB |",
		"| reference kernel decoding a 4 MiB argument | ≤ 3× |",
		"### Payload in the result as `output`, call to answer, by size",
		"| 15 MiB |",
		"### First tools/list by catalogue size",
		"## What the numbers are made of",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("BENCHMARKS.md lacks %q", want)
		}
	}
	if strings.Contains(doc, "not measured") {
		t.Errorf("a target is not measured although every peer was:\n%s", doc)
	}
}

func TestTablesWithoutSomePeersSayWhatWasNotMeasured(t *testing.T) {
	var b bytes.Buffer
	r := fakeReport("echo", "direct", "sharedos-mcp")
	if err := r.document(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| the same | ≤ 1.1× | minimal relay's added latency | not measured |",
		"| the TypeScript-SDK Node peer's cold start | serve ≥ 100× faster | – | not measured |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("BENCHMARKS.md lacks %q", want)
		}
	}
}

// A missed target that no relay could meet here says what bounds it; one
// that a floor does not bound says nothing more.
func TestMissedTargetsNameTheFloorThatBoundsThem(t *testing.T) {
	r := fakeReport("echo", "lockstep", "direct", "sharedos-mcp", "node")
	set := func(key string, p50, cold time.Duration) {
		for i := range r.results[key] {
			r.results[key][i].synth.p50, r.results[key][i].cold = p50, cold
		}
	}
	set("echo", 8*time.Microsecond, 1700*time.Microsecond)
	set("direct", 12*time.Microsecond, 200*time.Microsecond)
	set("lockstep", 31*time.Microsecond, 2*time.Millisecond)
	set("sharedos-mcp", 45*time.Microsecond, 4*time.Millisecond)
	set("node", time.Millisecond, 270*time.Millisecond)
	r.spawns[2].d = 3800 * time.Microsecond
	var b bytes.Buffer
	r.targets(&b)
	doc := b.String()
	for _, want := range []string{
		"| **no**; bounded: the lockstep relay, the least any relay does, adds 19.0 µs (2.38×) |",
		"| **no**; bounded: sharedos-mcp version spawned to exit takes 3.80 ms (2.00×) before serve does anything (docs/adr/0023) |",
		"| **no**; bounded: the Node peer is 71.05× the time sharedos-mcp version takes to spawn and exit |",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("targets lack %q:\n%s", want, doc)
		}
	}

	// A lockstep relay within the target bounds nothing.
	set("lockstep", 20*time.Microsecond, 2*time.Millisecond)
	b.Reset()
	r.targets(&b)
	if strings.Contains(b.String(), "the lockstep relay, the least") {
		t.Errorf("a lockstep relay under the target is named as its bound:\n%s", b.String())
	}
}

func TestTelemetrySummaryTakesEachVariantsMedian(t *testing.T) {
	out := `goos: linux
BenchmarkCallWithTelemetry/off-2         	   13723	     80000 ns/op	    7398 B/op	      95 allocs/op
BenchmarkCallWithTelemetry/off-2         	   12412	     90000 ns/op	    7394 B/op	      94 allocs/op
BenchmarkCallWithTelemetry/off-2         	   10000	    500000 ns/op	    7394 B/op	      94 allocs/op
BenchmarkCallWithTelemetry/traces-metrics-2         	   10000	    100000 ns/op	   15483 B/op	     158 allocs/op
BenchmarkCallWithTelemetry/traces-metrics-audit-2   	    9249	    150000 ns/op	   29745 B/op	     258 allocs/op
PASS
`
	got := telemetrySummary(out)
	for _, want := range []string{"**90.0 µs** without [telemetry]", "**100.0 µs** (+10.0 µs)", "**150.0 µs** (+60.0 µs)"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q does not say %q", got, want)
		}
	}
}
