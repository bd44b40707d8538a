package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

type report struct {
	opts      options
	peers     []peer
	results   map[string][]sample
	loadStart string
	loadEnd   string
	micro     string
	spawns    []spawnFloor
	hop       callStats     // calls through bench/cmd/stdiofloor
	fault     time.Duration // first touch of a page of fresh memory
}

// spawnFloor is what starting a process and seeing it exit costs.
type spawnFloor struct {
	name   string
	d      time.Duration
	faults int64 // minor page faults
}

// metric is one row: how to read it from a sample, how to print it, and
// whether smaller is better (everything but throughput).
type metric struct {
	name    string
	value   func(sample) float64
	format  func(float64) string
	smaller bool
	direct  bool              // meaningful for the direct client
	order   func(sample) bool // for throughput: whether answers came in order
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func fmtMs(v float64) string    { return fmt.Sprintf("%.2f ms", v) }
func fmtUs(v float64) string    { return fmt.Sprintf("%.1f µs", v) }
func fmtMB(v float64) string    { return fmt.Sprintf("%.1f MB", v/(1<<20)) }
func fmtRate(v float64) string  { return fmt.Sprintf("%.0f /s", v) }
func fmtCount(v float64) string { return fmt.Sprintf("%.0f", v) }

func metrics() []metric {
	m := []metric{
		{"cold start: spawn → initialize answered (direct: dial → hello answered)", func(s sample) float64 { return ms(s.cold) }, fmtMs, true, true, nil},
	}
	for _, n := range catalogueSizes {
		m = append(m, metric{fmt.Sprintf("tools/list of %d, first (fetch, project, hash, write)", n), func(s sample) float64 { return ms(s.listFirst[n]) }, fmtMs, true, true, nil})
	}
	last := catalogueSizes[len(catalogueSizes)-1]
	return append(m,
		metric{fmt.Sprintf("tools/list of %d, again", last), func(s sample) float64 { return ms(s.listAgain) }, fmtMs, true, true, nil},
		metric{"tools/call sequential p50, reference kernel", func(s sample) float64 { return us(s.ref.p50) }, fmtUs, true, true, nil},
		metric{"tools/call sequential p99, reference kernel", func(s sample) float64 { return us(s.ref.p99) }, fmtUs, true, true, nil},
		metric{"tools/call pipelined throughput, reference kernel", func(s sample) float64 { return s.ref.rate }, fmtRate, false, true, func(s sample) bool { return s.ref.inOrder }},
		metric{"tools/call sequential p50, synthetic kernel", func(s sample) float64 { return us(s.synth.p50) }, fmtUs, true, true, nil},
		metric{"tools/call sequential p99, synthetic kernel", func(s sample) float64 { return us(s.synth.p99) }, fmtUs, true, true, nil},
		metric{"tools/call pipelined throughput, synthetic kernel", func(s sample) float64 { return s.synth.rate }, fmtRate, false, true, func(s sample) bool { return s.synth.inOrder }},
		metric{"peak RSS, session ended after initialize", func(s sample) float64 { return float64(s.coldRSS) }, fmtMB, true, false, nil},
		metric{"peak RSS, calls sessions (pipelined included)", func(s sample) float64 { return float64(s.rssCalls) }, fmtMB, true, false, nil},
		metric{fmt.Sprintf("peak RSS, session listing %d tools", last), func(s sample) float64 { return float64(s.rssList) }, fmtMB, true, false, nil},
		metric{"minor page faults, spawn → initialize → exit", func(s sample) float64 { return float64(s.coldFault) }, fmtCount, true, false, nil},
		metric{fmt.Sprintf("minor page faults, session listing %d tools", last), func(s sample) float64 { return float64(s.listFault) }, fmtCount, true, false, nil},
		metric{"size on disk to run it", nil, fmtMB, true, false, nil},
	)
}

// value is the median over runs of m for peer p, or false when it does
// not apply.
func (r *report) value(m metric, p peer) (float64, bool) {
	if p.command == nil && !m.direct {
		return 0, false
	}
	if m.value == nil {
		return float64(p.size), p.size > 0
	}
	var vs []float64
	for _, s := range r.results[p.key] {
		vs = append(vs, m.value(s))
	}
	if len(vs) == 0 {
		return 0, false
	}
	return median(vs), true
}

func (r *report) inOrder(m metric, p peer) bool {
	for _, s := range r.results[p.key] {
		if !m.order(s) {
			return false
		}
	}
	return true
}

func (r *report) peer(key string) (peer, bool) {
	for _, p := range r.peers {
		if p.key == key {
			return p, true
		}
	}
	return peer{}, false
}

// tables writes the result tables: medians, ratios, targets, growth.
func (r *report) tables(w io.Writer) {
	ms := metrics()
	fmt.Fprintf(w, "### Medians of %d runs\n\n| | %s |\n|---|%s\n", r.opts.runs, labels(r.peers, " | "), strings.Repeat("---:|", len(r.peers)))
	for _, m := range ms {
		cells := make([]string, len(r.peers))
		for i, p := range r.peers {
			v, ok := r.value(m, p)
			if !ok {
				cells[i] = "–"
				continue
			}
			cells[i] = m.format(v)
			if m.order != nil {
				if r.inOrder(m, p) {
					cells[i] += ", in order"
				} else {
					cells[i] += ", **out of order**"
				}
			}
		}
		fmt.Fprintf(w, "| %s | %s |\n", m.name, strings.Join(cells, " | "))
	}

	shim, hasShim := r.peer("sharedos-mcp")
	if !hasShim {
		return
	}
	var others []peer
	for _, p := range r.peers {
		if p.command != nil && p.key != shim.key {
			others = append(others, p)
		}
	}
	if len(others) > 0 {
		fmt.Fprintf(w, "\n### How many times better sharedos-mcp serve is\n\nEach cell is the peer's median over sharedos-mcp's (throughput: the other way round), so above 1 means sharedos-mcp is ahead.\n\n| | %s |\n|---|%s\n", labels(others, " | "), strings.Repeat("---:|", len(others)))
		for _, m := range ms {
			base, ok := r.value(m, shim)
			if !ok || base == 0 {
				continue
			}
			cells := make([]string, len(others))
			for i, p := range others {
				v, ok := r.value(m, p)
				switch {
				case !ok || v == 0:
					cells[i] = "–"
				case m.smaller:
					cells[i] = fmt.Sprintf("%.1f×", v/base)
				default:
					cells[i] = fmt.Sprintf("%.1f×", base/v)
				}
			}
			fmt.Fprintf(w, "| %s | %s |\n", m.name, strings.Join(cells, " | "))
		}
	}

	r.targets(w, shim, ms)
	r.growth(w)
	r.floorTable(w)
}

// floorTable shows what the machine costs before any relay does
// anything.
func (r *report) floorTable(w io.Writer) {
	fmt.Fprintf(w, "\n### Floors: what the machine costs before any relay does anything\n\n| | median |\n|---|---:|\n")
	for _, f := range r.spawns {
		fmt.Fprintf(w, "| spawn → exit: %s | %s, %d minor page faults |\n", f.name, fmtMs(ms(f.d)), f.faults)
	}
	fmt.Fprintf(w, "| first touch of one page of fresh memory (a minor page fault) | %s |\n", fmtUs(us(r.fault)))
	fmt.Fprintf(w, "| one stdio round trip to a Go process that answers at once (bench/cmd/stdiofloor), p50 | %s |\n", fmtUs(us(r.hop.p50)))
	fmt.Fprintf(w, "| the same, p99 | %s |\n", fmtUs(us(r.hop.p99)))
	fmt.Fprintf(w, "| the same, pipelined | %s |\n", fmtRate(r.hop.rate))
}

func labels(ps []peer, sep string) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.label
	}
	return strings.Join(s, sep)
}

func metricNamed(ms []metric, prefix string) metric {
	for _, m := range ms {
		if strings.HasPrefix(m.name, prefix) {
			return m
		}
	}
	panic("no metric " + prefix)
}

func (r *report) metricValue(ms []metric, name string, p peer) float64 {
	v, _ := r.value(metricNamed(ms, name), p)
	return v
}

// targets checks the numbers the project set itself (on 2 cores), next to
// what this machine allows at best: a floor measured in the same run that
// no relay can beat (– where there is none).
func (r *report) targets(w io.Writer, shim peer, ms []metric) {
	fmt.Fprintf(w, "\n### Targets\n\nThe floor is what the same thing costs here with no relay doing any work: a target below its floor cannot be met on this machine.\n\n| target | measured | floor here | met |\n|---|---:|---:|:---:|\n")
	row := func(name, measured, floor string, met bool) {
		mark := "yes"
		if !met {
			mark = "**no**"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, measured, floor, mark)
	}
	hop := fmtUs(us(r.hop.p50)) + " (one stdio round trip)"
	direct, hasDirect := r.peer("direct")
	if hasDirect {
		for _, k := range []string{"synthetic", "reference"} {
			name := "tools/call sequential p50, " + k + " kernel"
			added := r.metricValue(ms, name, shim) - r.metricValue(ms, name, direct)
			row("added latency over direct, p50 ≤ 15 µs ("+k+" kernel)", fmtUs(added), hop, added <= 15)
		}
	}
	cold := r.metricValue(ms, "cold start", shim)
	coldFloor := "–"
	if hasDirect && len(r.spawns) > 1 {
		goStart := float64(r.spawns[1].d) / float64(time.Millisecond)
		coldFloor = fmtMs(goStart+r.metricValue(ms, "cold start", direct)) + " (empty Go binary + dial and hello)"
	}
	row("cold start to initialize answered ≤ 5 ms", fmtMs(cold), coldFloor, cold <= 5)
	if node, ok := r.peer("node"); ok {
		nc := r.metricValue(ms, "cold start", node)
		row("cold start ≥ 100× faster than the Node peer", fmt.Sprintf("%.0f×", nc/cold), "–", nc/cold >= 100)
	}
	last := catalogueSizes[len(catalogueSizes)-1]
	listName := fmt.Sprintf("tools/list of %d, first", last)
	l := r.metricValue(ms, listName, shim)
	listFloor := "–"
	if hasDirect {
		listFloor = fmtMs(r.metricValue(ms, listName, direct)) + " (fetching it directly)"
	}
	row(fmt.Sprintf("tools/list of %d tools, first time ≤ 2 ms", last), fmtMs(l), listFloor, l <= 2)
	for _, k := range []string{"synthetic", "reference"} {
		m := metricNamed(ms, "tools/call pipelined throughput, "+k)
		rate, _ := r.value(m, shim)
		order := map[bool]string{true: ", in order", false: ", out of order"}[r.inOrder(m, shim)]
		ceiling := r.hop.rate
		if hasDirect {
			d, _ := r.value(m, direct)
			ceiling = min(ceiling, d)
		}
		row("pipelined ≥ 50,000 calls/s, answers in order ("+k+" kernel)", fmtRate(rate)+order, fmtRate(ceiling)+" (direct, or stdio alone)", rate >= 50000 && r.inOrder(m, shim))
	}
	rss := max(r.metricValue(ms, "peak RSS, calls", shim), r.metricValue(ms, "peak RSS, session listing", shim))
	row("peak RSS ≤ 15 MB", fmtMB(rss), "–", rss <= 15<<20)
}

// growth shows how the first tools/list grows with the catalogue.
func (r *report) growth(w io.Writer) {
	fmt.Fprintf(w, "\n### First tools/list by catalogue size\n\n| tools | %s |\n|---:|%s\n", labels(r.peers, " | "), strings.Repeat("---:|", len(r.peers)))
	first, last := catalogueSizes[0], catalogueSizes[len(catalogueSizes)-1]
	get := func(p peer, n int) float64 {
		var vs []float64
		for _, s := range r.results[p.key] {
			vs = append(vs, ms(s.listFirst[n]))
		}
		return median(vs)
	}
	for _, n := range catalogueSizes {
		cells := make([]string, len(r.peers))
		for i, p := range r.peers {
			cells[i] = fmtMs(get(p, n))
		}
		fmt.Fprintf(w, "| %d | %s |\n", n, strings.Join(cells, " | "))
	}
	cells := make([]string, len(r.peers))
	for i, p := range r.peers {
		cells[i] = fmt.Sprintf("%.0f×", get(p, last)/get(p, first))
	}
	fmt.Fprintf(w, "| %d ÷ %d | %s |\n", last, first, strings.Join(cells, " | "))
}

// analysis says, from the numbers above, what each figure is made of,
// so a missed target comes with what bounds it.
func (r *report) analysis(w io.Writer) {
	shim, ok := r.peer("sharedos-mcp")
	direct, hasDirect := r.peer("direct")
	if !ok || !hasDirect || len(r.spawns) < 3 {
		return
	}
	mets := metrics()
	v := func(p peer, name string) float64 { return r.metricValue(mets, name, p) }
	last := catalogueSizes[len(catalogueSizes)-1]
	fmt.Fprintf(w, "\n## What the numbers are made of\n\n")

	cold, directCold, goStart := v(shim, "cold start"), v(direct, "cold start"), ms(r.spawns[1].d)
	coldFaults, pageCost := v(shim, "minor page faults, spawn"), us(r.fault)
	peerFaults := ""
	if _, ok := r.peer("gosdk"); ok {
		peerFaults = fmt.Sprintf(" (the Go SDK peer: %.0f)", r.valueOr(mets, "minor page faults, spawn", "gosdk"))
	}
	fmt.Fprintf(w, "- **Cold start, %s.** Starting an empty static Go binary and seeing it exit takes %s on this machine (/bin/true: %s; `sharedos-mcp version`: %s), and connecting to the kernel with hello answered takes %s from a running process. That leaves %s for serve's own start and its first initialize. A serve that answers initialize and exits takes %.0f minor page faults%s, the empty binary %d; one fault costs %s here, so the %.0f faults above the empty binary's come to about %s. The runtime's start is the floor: no Go relay starts faster than the empty binary, and what serve adds is mostly the memory a larger program touches while its packages initialise.\n",
		fmtMs(cold), fmtMs(goStart), fmtMs(ms(r.spawns[0].d)), fmtMs(ms(r.spawns[2].d)), fmtMs(directCold), fmtMs(max(0, cold-goStart-directCold)),
		coldFaults, peerFaults, r.spawns[1].faults, fmtUs(pageCost),
		max(0, coldFaults-float64(r.spawns[1].faults)), fmtMs(max(0, coldFaults-float64(r.spawns[1].faults))*pageCost/1000))

	for _, k := range []string{"synthetic", "reference"} {
		name := "tools/call sequential p50, " + k + " kernel"
		added := v(shim, name) - v(direct, name)
		fmt.Fprintf(w, "- **Added latency, %s kernel: %s at p50.** Through serve a call crosses two more process boundaries than a direct call: client → serve and serve → client over pipes. One stdio round trip to a Go process that answers at once costs %s at p50 here (%s at p99), so %s is serve's own work and the wake-ups of its goroutines and threads (stdin reader, kernel reader, the call's goroutine, stdout writer). BenchmarkRelayedCallSynth below measures the same relay in one process, without the pipes.\n",
			k, fmtUs(added), fmtUs(us(r.hop.p50)), fmtUs(us(r.hop.p99)), fmtUs(max(0, added-us(r.hop.p50))))
	}

	first, again := v(shim, fmt.Sprintf("tools/list of %d, first", last)), v(shim, fmt.Sprintf("tools/list of %d, again", last))
	faults := v(shim, "minor page faults, session listing") - v(shim, "minor page faults, spawn")
	fmt.Fprintf(w, "- **First tools/list of %d tools, %s** (again: %s; the direct client fetching the same catalogue: %s). The first one fetches about half a megabyte, decodes it, projects and hashes it and writes the MCP form; the session that does it takes %.0f more minor page faults than one that only answers initialize, that is about %s of memory touched for the first time, which at %s a fault is about %s of the %s. The same work in a warm process, where memory is reused, is BenchmarkFirstList512 below; the second tools/list, which writes the kept MCP form again, is the floor for writing half a megabyte to a pipe and reading it.\n",
		last, fmtMs(first), fmtMs(again), fmtMs(v(direct, fmt.Sprintf("tools/list of %d, first", last))), faults, fmtMB(faults*4096),
		fmtUs(pageCost), fmtMs(faults*pageCost/1000), fmtMs(first))

	for _, k := range []string{"synthetic", "reference"} {
		name := "tools/call pipelined throughput, " + k + " kernel"
		fmt.Fprintf(w, "- **Pipelined, %s kernel: %s** (direct: %s). A process that answers at once without a kernel sustains %s over the same pipes.\n",
			k, fmtRate(v(shim, name)), fmtRate(v(direct, name)), fmtRate(r.hop.rate))
	}
	fmt.Fprintf(w, "- **Peak RSS.** %s after initialize alone, %s in the calls sessions, %s listing %d tools.\n",
		fmtMB(v(shim, "peak RSS, session ended")), fmtMB(v(shim, "peak RSS, calls")), fmtMB(v(shim, "peak RSS, session listing")), last)
	fmt.Fprintf(w, "\nThe load average (1, 5, 15 min) was %s at the start of the run and %s at the end; on a quieter machine every figure above is lower, the floors included.\n", r.loadStart, r.loadEnd)
}

// valueOr is a metric's median for the peer with key, or 0 when that
// peer was not measured.
func (r *report) valueOr(ms []metric, name, key string) float64 {
	p, ok := r.peer(key)
	if !ok {
		return 0
	}
	return r.metricValue(ms, name, p)
}

// document writes BENCHMARKS.md.
func (r *report) document(w io.Writer) error {
	o := r.opts
	fmt.Fprintf(w, `# Benchmarks

Generated by `+"`make bench-relay`"+` (`+"`go run ./bench/cmd/benchrelay -markdown > BENCHMARKS.md`"+`) on %s. Do not edit by hand: rerun it.

## What is measured

One client, four ways of reaching the same kernel:

- **direct (floor)**: the client speaks NDJSON JSON-RPC to the reference kernel's socket itself (integration.hello, tools.invoke). Nothing to spawn.
- **sharedos-mcp serve**: the client spawns `+"`sharedos-mcp serve`"+` (built with the release flags: `+"`CGO_ENABLED=0 -trimpath -ldflags '-s -w'`"+`) and speaks MCP over its stdio.
- **Go SDK v1.8.0**: bench/gosdk, a relay on `+"`mcp.NewServer`"+` + `+"`mcp.StdioTransport`"+` relaying to the kernel with kernelclient, same build flags.
- **TS SDK 1.32.2 (Node)**: bench/node/bridge.mjs, a relay on the TypeScript SDK's `+"`Server`"+` + `+"`StdioServerTransport`"+` relaying to the kernel socket over NDJSON.

Every peer connects to the kernel and says hello before answering initialize, and fetches the catalogue on the first tools/list or tools/call. sharedos-mcp does more than the SDK peers on that path: it checks the kernel's peer credentials (the Go SDK peer does too, through kernelclient; Node cannot), projects the catalogue and recomputes its catalogHash, and keeps answers in arrival order.

Calls are `+"`files.read`"+` of a %d-byte file through the reference kernel (`+"`sharedos-mcp kernel`"+`, default grants), which checks the grant and appends an audit line per call. Catalogue sizes are served by a synthetic kernel in the harness (bench/internal/synth) with realistic tool definitions of 0.9–1.4 KB each and a correct catalogHash.

Per run and peer: %d cold starts (median taken), a session for calls (%d warm-up calls, %d sequential calls timed one by one, then %d calls written without waiting: throughput is calls over the time to the last answer, and the answers' order is checked), and one fresh session per catalogue size timing its first and second tools/list. Peak RSS is the peer's VmHWM from /proc, read just before its stdin closes; page faults are wait4's minor-fault count. Size on disk is the binary, or for Node the node binary plus bridge.mjs and node_modules. %d runs; every figure is the median of the runs.

## Machine

- CPUs: %d × %s
- Linux %s, %s, Node %s
- load average (1, 5, 15 min) at start: %s; at end: %s

The machine is shared with other engineers' test suites (see the load averages), so the numbers are noisy. Medians of repeated runs damp that; the ratios between peers, measured interleaved in the same runs, are steadier than the absolute figures.

## Results

`, time.Now().UTC().Format("2006-01-02 15:04 UTC"), len(noteContent), o.cold, o.load.warmup, o.load.sequential, o.load.pipelined, o.runs,
		runtime.NumCPU(), cpuModel(), osRelease(), commandLine("go", "version"), commandLine("node", "--version"), r.loadStart, r.loadEnd)
	r.tables(w)
	r.analysis(w)
	fmt.Fprintf(w, "\n## Commands\n\n```\n%s```\n", strings.Join([]string{
		"make bench-relay    # this file: npm ci --prefix bench/node, then go run ./bench/cmd/benchrelay -markdown",
		"make bench          # the go test benchmarks alone",
		"go run ./bench/cmd/benchrelay -peers direct,sharedos-mcp -shim PATH    # the tables for another build, to compare",
		"go test -run '^$' -bench FirstList512 -cpuprofile cpu.out ./bench/internal/synth    # profile one path",
		"",
	}, "\n"))
	if r.micro != "" {
		fmt.Fprintf(w, "\n## Micro-benchmarks\n\n`go test -run '^$' -bench . -benchmem -count 5 %s`:\n\n```\n%s```\n", strings.Join(microPackages, " "), r.micro)
	}
	return nil
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func osRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

func commandLine(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return name + " unavailable"
	}
	return strings.TrimSpace(string(out))
}
