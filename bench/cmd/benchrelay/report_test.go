package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
		spawns: []spawnFloor{{"/bin/true", time.Millisecond, 50}, {"gofloor", 2 * time.Millisecond, 150}, {versionFloor, 5 * time.Millisecond, 300}},
		source: sourceFacts{scanned: true}}
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
		"| added latency per call, p50 | ≤ 1.25× | minimal relay's added latency |",
		"| pipelined calls, in order | ≥ 1× | minimal relay |",
		"| first `tools/list`, 512 tools (fetch, project, hash, write) | ≤ 1× | minimal relay's first list |",
		"| 4 MiB argument, call to answer | ≤ 2× | direct round trip + an echo round trip of the same bytes |",
		"| 4 MiB result as `content`, call to answer | ≤ 2× |",
		"| 4 MiB result as `output`, call to answer | ≤ 2× |",
		"| tools/call p50 | ≥ 4× ahead | Go SDK and TS SDK relays |",
		"| pipelined calls | ≥ 4× ahead |",
		"| 4 MiB argument, call to answer | ≥ 4× ahead |",
		"| 4 MiB result as `content`, call to answer | ≥ 4× ahead |",
		"| 4 MiB result as `output`, call to answer | ≥ 4× ahead |",
		"| first `tools/list`, 512 tools | ≥ 4× ahead |",
		"| cold start to `initialize` answered (connect, peer check, hello) | ≤ 1.25× | Go SDK relay |",
		"| peak RSS, session ended after `initialize` | ≤ 1.25× | Go SDK relay |",
		"| the same | ≥ 20× ahead | TS SDK relay |",
		"| peak RSS of `serve` relaying 4 MiB | ≤ 32 MiB |",
		"| assembly (`.s` files in the module) | none |",
		"| `unsafe` imports | only where a system call needs it |",
		"| `mmap` outside the benchmarks | none |",
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
		"| added latency per call, p50 | ≤ 1.25× | minimal relay's added latency | not measured |",
		"| tools/call p50 | ≥ 4× ahead | Go SDK and TS SDK relays | Go SDK not measured; TS SDK not measured |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("BENCHMARKS.md lacks %q", want)
		}
	}
}

// TestTheLesserPeerRatioCounts: serve is held to both peers, and a budget
// met against one and missed against the other is missed, at the lesser
// ratio; the source rows name what they found.
func TestTheLesserPeerRatioCounts(t *testing.T) {
	r := fakeReport("echo", "direct", "minrelay", "sharedos-mcp", "gosdk", "node")
	set := func(key string, p50 time.Duration) {
		for i := range r.results[key] {
			r.results[key][i].synth.p50 = p50
		}
	}
	set("sharedos-mcp", 40*time.Microsecond)
	set("gosdk", 400*time.Microsecond)
	set("node", 120*time.Microsecond)
	r.source = sourceFacts{scanned: true, asm: []string{"x/a.s"}, unsafe: []string{"x/sys.go"}}
	var b bytes.Buffer
	r.targets(&b)
	doc := b.String()
	for _, want := range []string{
		"| tools/call p50 | ≥ 4× ahead | Go SDK and TS SDK relays | Go SDK 400.0 µs; TS SDK 120.0 µs | 40.0 µs | 3.00× | **no** |",
		"| assembly (`.s` files in the module) | none | – | – | 1: x/a.s | – | **no** |",
		"| `unsafe` imports | only where a system call needs it | – | – | 1: x/sys.go | – | yes |",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("targets lack %q:\n%s", want, doc)
		}
	}
}

// TestScanSourceFindsAssemblyUnsafeAndMmap reads a small module: a .s
// file, unsafe with and without a system call beside it, and Mmap in and
// outside bench/; test files and test data do not count.
func TestScanSourceFindsAssemblyUnsafeAndMmap(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"a/esc_amd64.s":         "TEXT ·f(SB),4,$0\n",
		"a/sys.go":              "package a\nimport (\n\t\"unsafe\"\n\t\"golang.org/x/sys/unix\"\n)\nvar _ = unsafe.Sizeof(0)\nvar _ = unix.Getpid\n",
		"a/str.go":              "package a\nimport \"unsafe\"\nvar _ = unsafe.Sizeof(0)\n",
		"a/str_test.go":         "package a\nimport \"unsafe\"\nvar _ = unsafe.Sizeof(0)\n",
		"b/buf.go":              "package b\nimport \"syscall\"\nvar _, _ = syscall.Mmap(-1, 0, 1, 0, 0)\n",
		"bench/x/fault.go":      "package x\nimport \"syscall\"\nvar _, _ = syscall.Mmap(-1, 0, 1, 0, 0)\n",
		"a/testdata/x/x.s":      "",
		"node_modules/m/lib.go": "package m\nimport \"unsafe\"\n",
	}
	for name, body := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := scanSource(root)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(f.asm, f.unsafe, f.unsafeNoSyscall, f.mmap)
	if want := fmt.Sprint([]string{"a/esc_amd64.s"}, []string{"a/str.go", "a/sys.go"}, []string{"a/str.go"}, []string{"b/buf.go"}); got != want {
		t.Errorf("scanSource = %s, want %s", got, want)
	}
}

// TestAFailedRunIsSaid: a peer's run that failed is named in the document,
// and its medians are of the runs that did not.
func TestAFailedRunIsSaid(t *testing.T) {
	r := fakeReport("echo", "direct", "minrelay", "sharedos-mcp", "gosdk", "node")
	r.leftOut = []string{"run 5: node: payloads: EOF"}
	var b bytes.Buffer
	if err := r.document(&b); err != nil {
		t.Fatal(err)
	}
	if want := "Left out of the medians, each a peer's run that failed: run 5: node: payloads: EOF."; !strings.Contains(b.String(), want) {
		t.Errorf("BENCHMARKS.md lacks %q", want)
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

// TestMarkedSectionsKeepsOtherCommandsSections: a rerun of make
// bench-relay keeps what benchremote wrote into BENCHMARKS.md, once, and
// nothing else of the old file.
func TestMarkedSectionsKeepsOtherCommandsSections(t *testing.T) {
	old := "# Benchmarks\n\nold tables <!-- not a section -->\n\n" +
		"<!-- benchremote:begin -->\n\n## Remote\n\n| a |\n<!-- benchremote:end -->\n\nstray text\n" +
		"<!-- other:begin -->\nB\n<!-- other:end -->\n<!-- other:begin -->\nC\n<!-- other:end -->\n<!-- open:begin -->\nunterminated\n"
	got := markedSections(old)
	want := "<!-- benchremote:begin -->\n\n## Remote\n\n| a |\n<!-- benchremote:end -->\n\n" +
		"<!-- other:begin -->\nC\n<!-- other:end -->\n"
	if got != want {
		t.Errorf("markedSections:\n%q\nwant\n%q", got, want)
	}
	if got := markedSections("# Benchmarks\n"); got != "" {
		t.Errorf("markedSections of a file without sections = %q, want none", got)
	}
}
