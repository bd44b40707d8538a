package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

type report struct {
	opts      options
	peers     []peer // echo first
	results   map[string][]sample
	loadStart string
	loadEnd   string
	kept      string // other commands' marked sections, written after the document's own
	micro     string
	telemetry string // BenchmarkCallWithTelemetry's output
	spawns    []spawnFloor
	fault     time.Duration // first touch of a page of fresh memory
	decode    time.Duration // the reference kernel decoding a targetPayload argument
	valid     time.Duration // json.Valid over the same arguments
	source    sourceFacts   // what the module's source holds of assembly, unsafe and mmap
	leftOut   []string      // peers' runs that failed, and why: their figures are not in the medians
}

// spawnFloor is what starting a process and seeing it exit costs.
type spawnFloor struct {
	name   string
	d      time.Duration
	faults int64 // minor page faults
}

// metric is one row: how to read it from a sample (false when it does not
// apply to that peer), how to print it, and whether smaller is better
// (everything but throughput).
type metric struct {
	name    string
	value   func(sample) (float64, bool)
	format  func(float64) string
	smaller bool
	order   func(sample) bool // for throughput: whether answers came in order
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func fmtMs(v float64) string    { return fmt.Sprintf("%.2f ms", v) }
func fmtUs(v float64) string    { return fmt.Sprintf("%.1f µs", v) }
func fmtMB(v float64) string    { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }
func fmtRate(v float64) string  { return fmt.Sprintf("%.0f /s", v) }
func fmtCount(v float64) string { return fmt.Sprintf("%.0f", v) }
func fmtX(v float64) string     { return fmt.Sprintf("%.2f×", v) }

// fmtSize names a payload size.
func fmtSize(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// msOf and friends read a duration, a count or a size that is zero when
// it was not measured.
func msOf(d time.Duration) (float64, bool) { return ms(d), d > 0 }
func usOf(d time.Duration) (float64, bool) { return us(d), d > 0 }
func countOf(n int64) (float64, bool)      { return float64(n), n > 0 }

func payloadMs(k payloadKind, n int) func(sample) (float64, bool) {
	return func(s sample) (float64, bool) { return msOf(s.payload[payloadKey{k, n}].warm) }
}

func metrics() []metric {
	m := []metric{
		{"cold start: spawn → initialize answered (direct: dial → hello answered; echo: spawn → first line back)", func(s sample) (float64, bool) { return msOf(s.cold) }, fmtMs, true, nil},
		{"cold start, reference kernel", func(s sample) (float64, bool) { return msOf(s.coldRef) }, fmtMs, true, nil},
	}
	for _, n := range catalogueSizes {
		m = append(m, metric{fmt.Sprintf("tools/list of %d, first (fetch, project, hash, write)", n), func(s sample) (float64, bool) { return msOf(s.listFirst[n]) }, fmtMs, true, nil})
	}
	last := catalogueSizes[len(catalogueSizes)-1]
	m = append(m,
		metric{fmt.Sprintf("tools/list of %d, again", last), func(s sample) (float64, bool) { return msOf(s.listAgain) }, fmtMs, true, nil},
		metric{"tools/call sequential p50, synthetic kernel", func(s sample) (float64, bool) { return usOf(s.synth.p50) }, fmtUs, true, nil},
		metric{"tools/call sequential p99, synthetic kernel", func(s sample) (float64, bool) { return usOf(s.synth.p99) }, fmtUs, true, nil},
		metric{"tools/call pipelined throughput, synthetic kernel", func(s sample) (float64, bool) { return s.synth.rate, s.synth.rate > 0 }, fmtRate, false, func(s sample) bool { return s.synth.inOrder }},
		metric{"tools/call sequential p50, reference kernel", func(s sample) (float64, bool) { return usOf(s.ref.p50) }, fmtUs, true, nil},
		metric{"tools/call sequential p99, reference kernel", func(s sample) (float64, bool) { return usOf(s.ref.p99) }, fmtUs, true, nil},
		metric{"tools/call pipelined throughput, reference kernel", func(s sample) (float64, bool) { return s.ref.rate, s.ref.rate > 0 }, fmtRate, false, func(s sample) bool { return s.ref.inOrder }},
	)
	for _, k := range payloadKinds {
		m = append(m, metric{fmt.Sprintf("%s %s, call to answer", fmtSize(targetPayload), k), payloadMs(k, targetPayload), fmtMs, true, nil})
	}
	return append(m,
		metric{"peak RSS, session ended after initialize", func(s sample) (float64, bool) { return countOf(s.coldRSS) }, fmtMB, true, nil},
		metric{"peak RSS, calls sessions (pipelined included)", func(s sample) (float64, bool) { return countOf(s.rssCalls) }, fmtMB, true, nil},
		metric{fmt.Sprintf("peak RSS, session listing %d tools", last), func(s sample) (float64, bool) { return countOf(s.rssList) }, fmtMB, true, nil},
		metric{fmt.Sprintf("peak RSS, session relaying %s payloads", fmtSize(targetPayload)), func(s sample) (float64, bool) { return countOf(s.rssLoad[targetPayload]) }, fmtMB, true, nil},
		metric{"minor page faults, spawn → initialize → exit", func(s sample) (float64, bool) { return countOf(s.coldFault) }, fmtCount, true, nil},
		metric{fmt.Sprintf("minor page faults, session listing %d tools", last), func(s sample) (float64, bool) { return countOf(s.listFault) }, fmtCount, true, nil},
		metric{"size on disk to run it", nil, fmtMB, true, nil},
	)
}

// value is the median over runs of m for peer p, or false when it does
// not apply.
func (r *report) value(m metric, p peer) (float64, bool) {
	if m.value == nil {
		return float64(p.size), p.size > 0
	}
	return r.med(p.key, m.value)
}

// med is the median over the runs where f applies, for the peer with key.
func (r *report) med(key string, f func(sample) (float64, bool)) (float64, bool) {
	var vs []float64
	for _, s := range r.results[key] {
		if v, ok := f(s); ok {
			vs = append(vs, v)
		}
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

// relays are the peers that relay MCP to a kernel: the minimal relay and
// the relays measured against it.
func (r *report) relays() []peer {
	var ps []peer
	for _, p := range r.peers {
		if p.command != nil && !p.echo && !p.lockstep {
			ps = append(ps, p)
		}
	}
	return ps
}

// tables writes the result tables: targets, medians, ratios, growth,
// floors.
func (r *report) tables(w io.Writer) {
	r.targets(w)
	ms := metrics()
	fmt.Fprintf(w, "\n### Medians of %d runs\n\n| | %s |\n|---|%s\n", r.opts.runs, labels(r.peers, " | "), strings.Repeat("---:|", len(r.peers)))
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
	r.versus(w, ms)
	r.payloadGrowth(w)
	r.listGrowth(w)
	r.floorTable(w)
}

// versus compares serve with every other relay, the minimal one included.
func (r *report) versus(w io.Writer, ms []metric) {
	shim, ok := r.peer("sharedos-mcp")
	if !ok {
		return
	}
	var others []peer
	for _, p := range r.relays() {
		if p.key != shim.key {
			others = append(others, p)
		}
	}
	if len(others) == 0 {
		return
	}
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

// payloadFloor is the floor of a payload call of kind k and size n: the
// direct client's call and an echo round trip of a line carrying the same
// payload, the one extra pipe hop a relay's bytes must cross.
func (r *report) payloadFloor(k payloadKind, n int) (floor, direct, echo float64, ok bool) {
	d, okD := r.med("direct", payloadMs(k, n))
	e, okE := r.med("echo", payloadMs(argument, n))
	return d + e, d, e, okD && okE
}

// payloadGrowth shows how each payload kind's call to answer grows with
// size, and the peak RSS of the sessions that relayed them.
func (r *report) payloadGrowth(w io.Writer) {
	relays := r.relays()
	for _, k := range payloadKinds {
		fmt.Fprintf(w, "\n### Payload in the %s, call to answer, by size\n\nThe floor is the direct call plus an echo round trip of a line carrying the same payload. Every time is the median of the calls after the first of their kind in a session; \"first\" is that first call, which in a fresh process touches fresh memory.\n\n| payload | echo | direct | floor | %s | sharedos-mcp serve, first | serve ÷ floor |\n|---:|---:|---:|---:|%s---:|---:|\n",
			k, labels(relays, " | "), strings.Repeat("---:|", len(relays)))
		for _, n := range payloadSizes {
			floor, d, e, ok := r.payloadFloor(k, n)
			cells := []string{fmtSize(n), fmtMs(e), fmtMs(d), fmtMs(floor)}
			if !ok {
				cells = []string{fmtSize(n), "–", "–", "–"}
			}
			for _, p := range relays {
				cells = append(cells, r.cell(p.key, payloadMs(k, n), fmtMs))
			}
			cells = append(cells, r.cell("sharedos-mcp", func(s sample) (float64, bool) { return msOf(s.payload[payloadKey{k, n}].first) }, fmtMs))
			shim, okS := r.med("sharedos-mcp", payloadMs(k, n))
			if ok && okS {
				cells = append(cells, fmtX(shim/floor))
			} else {
				cells = append(cells, "–")
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		}
	}
	fmt.Fprintf(w, "\n### Peak RSS of the session relaying payloads, by size\n\nOne session per size relays the argument and both result shapes. serve's budget is %s at %s.\n\n| payload | %s |\n|---:|%s\n", fmtMB(maxServeRSS), fmtSize(targetPayload), labels(relays, " | "), strings.Repeat("---:|", len(relays)))
	for _, n := range payloadSizes {
		cells := []string{fmtSize(n)}
		for _, p := range relays {
			cells = append(cells, r.cell(p.key, func(s sample) (float64, bool) { return countOf(s.rssLoad[n]) }, fmtMB))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

func (r *report) cell(key string, f func(sample) (float64, bool), format func(float64) string) string {
	if v, ok := r.med(key, f); ok {
		return format(v)
	}
	return "–"
}

// listGrowth shows how the first tools/list grows with the catalogue.
func (r *report) listGrowth(w io.Writer) {
	var ps []peer
	for _, p := range r.peers {
		if !p.echo && !p.lockstep {
			ps = append(ps, p)
		}
	}
	fmt.Fprintf(w, "\n### First tools/list by catalogue size\n\n| tools | %s |\n|---:|%s\n", labels(ps, " | "), strings.Repeat("---:|", len(ps)))
	first, last := catalogueSizes[0], catalogueSizes[len(catalogueSizes)-1]
	get := func(p peer, n int) float64 {
		v, _ := r.med(p.key, func(s sample) (float64, bool) { return msOf(s.listFirst[n]) })
		return v
	}
	for _, n := range catalogueSizes {
		cells := make([]string, len(ps))
		for i, p := range ps {
			cells[i] = fmtMs(get(p, n))
		}
		fmt.Fprintf(w, "| %d | %s |\n", n, strings.Join(cells, " | "))
	}
	cells := make([]string, len(ps))
	for i, p := range ps {
		cells[i] = fmt.Sprintf("%.0f×", get(p, last)/get(p, first))
	}
	fmt.Fprintf(w, "| %d ÷ %d | %s |\n", last, first, strings.Join(cells, " | "))
}

// floorTable shows what the machine costs before any relay does
// anything.
func (r *report) floorTable(w io.Writer) {
	fmt.Fprintf(w, "\n### Floors: what the machine costs before any relay does anything\n\n| | median |\n|---|---:|\n")
	for _, f := range r.spawns {
		fmt.Fprintf(w, "| spawn → exit: %s | %s, %d minor page faults |\n", f.name, fmtMs(ms(f.d)), f.faults)
	}
	fmt.Fprintf(w, "| first touch of one page of fresh memory (a minor page fault) | %s |\n", fmtUs(us(r.fault)))
	row := func(name string, f func(sample) (float64, bool), format func(float64) string) {
		fmt.Fprintf(w, "| %s | %s |\n", name, r.cell("echo", f, format))
	}
	row("echo (bench/cmd/echo): spawn → first line back", func(s sample) (float64, bool) { return msOf(s.cold) }, fmtMs)
	row("echo: one round trip of a tools/call line, p50", func(s sample) (float64, bool) { return usOf(s.synth.p50) }, fmtUs)
	row("echo: the same, p99", func(s sample) (float64, bool) { return usOf(s.synth.p99) }, fmtUs)
	row("echo: the same, pipelined", func(s sample) (float64, bool) { return s.synth.rate, s.synth.rate > 0 }, fmtRate)
	if _, ok := r.peer("lockstep"); ok {
		fmt.Fprintf(w, "| lockstep relay (bench/cmd/lockstep): spawn → initialize answered | %s |\n", r.cell("lockstep", func(s sample) (float64, bool) { return msOf(s.cold) }, fmtMs))
		added, ok := r.lockstepAdded()
		fmt.Fprintf(w, "| lockstep relay: added latency per call, p50 (its p50 %s, less direct's) | %s |\n",
			r.cell("lockstep", func(s sample) (float64, bool) { return usOf(s.synth.p50) }, fmtUs), cond(ok, fmtUs(added)))
	}
	fmt.Fprintf(w, "| `json.Valid` over %s of files.write arguments, the most the reference kernel decodes (in the harness) | %s |\n", fmtSize(targetPayload), fmtMs(ms(r.valid)))
	fmt.Fprintf(w, "| the reference kernel decoding the same argument (files.write of it, less files.write of one byte) | %s |\n", fmtMs(ms(r.decode)))
}

func labels(ps []peer, sep string) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.label
	}
	return strings.Join(s, sep)
}

// target is one row of the budgets table (issue 30).
type target struct {
	measure, goal string
	floorName     string  // what the measure is held to
	floor         string  // its value here, "–" when there is none
	measured      string  // the value, with detail
	ratio         float64 // measured over floor, or the other way for "ahead"; NaN for none
	ok            bool    // everything it needs was measured
	met           bool
}

// targets checks the budgets: each a ratio to a floor or to a peer
// measured in the same run (against the synthetic kernel, so the relay is
// what is measured), or a bound on serve itself.
func (r *report) targets(w io.Writer) {
	fmt.Fprintf(w, "### Targets\n\nThe budgets of issue 30. Each is a ratio to a floor or to a peer measured in the same run, against the synthetic kernel, or a bound on serve itself. \"Ahead\" is the peer's figure over serve's for times and sizes, serve's over the peer's for throughput; of two peers, the lesser ratio counts.\n\n| measure | budget | held to | there | serve | ratio | met |\n|---|---|---|---:|---:|---:|:---:|\n")
	for _, t := range r.targetRows() {
		mark, ratio := "–", "–"
		if t.ok {
			mark = "yes"
			if !t.met {
				mark = "**no**"
			}
			if !math.IsNaN(t.ratio) {
				ratio = fmtX(t.ratio)
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", t.measure, t.goal, t.floorName, t.floor, t.measured, ratio, mark)
	}
}

// The peers serve is held to, by key, with the names the budgets use.
var budgetPeers = []struct{ key, name string }{{"gosdk", "Go SDK"}, {"node", "TS SDK"}}

func (r *report) targetRows() []target {
	get := r.med
	p50 := func(s sample) (float64, bool) { return usOf(s.synth.p50) }
	rate := func(s sample) (float64, bool) { return s.synth.rate, s.synth.rate > 0 }
	cold := func(s sample) (float64, bool) { return msOf(s.cold) }
	coldRSS := func(s sample) (float64, bool) { return countOf(s.coldRSS) }
	last := catalogueSizes[len(catalogueSizes)-1]
	list := func(s sample) (float64, bool) { return msOf(s.listFirst[last]) }
	var rows []target

	// Against the minimal relay.
	direct, okD := get("direct", p50)
	shim, okS := get("sharedos-mcp", p50)
	minr, okM := get("minrelay", p50)
	added, minAdded := shim-direct, minr-direct
	rows = append(rows, target{"added latency per call, p50", "≤ 1.25×", "minimal relay's added latency", cond(okM && okD, fmtUs(minAdded)),
		cond(okS && okD, fmtUs(added)), added / minAdded, okS && okD && okM, added <= 1.25*minAdded})
	mRate, okM := get("minrelay", rate)
	sRate, okS := get("sharedos-mcp", rate)
	inOrder := r.allInOrder("sharedos-mcp")
	rows = append(rows, target{"pipelined calls, in order", "≥ 1×", "minimal relay", cond(okM, fmtRate(mRate)),
		cond(okS, fmtRate(sRate)+map[bool]string{true: ", in order", false: ", **out of order**"}[inOrder]), sRate / mRate, okM && okS, sRate >= mRate && inOrder})
	mList, okM := get("minrelay", list)
	sList, okS := get("sharedos-mcp", list)
	rows = append(rows, target{fmt.Sprintf("first `tools/list`, %d tools (fetch, project, hash, write)", last), "≤ 1×", "minimal relay's first list",
		cond(okM, fmtMs(mList)), cond(okS, fmtMs(sList)), sList / mList, okM && okS, sList <= mList})

	// Against the physical floor.
	for _, k := range payloadKinds {
		floor, _, _, okF := r.payloadFloor(k, targetPayload)
		v, ok := get("sharedos-mcp", payloadMs(k, targetPayload))
		rows = append(rows, target{fmtSize(targetPayload) + " " + k.String() + ", call to answer", "≤ 2×", "direct round trip + an echo round trip of the same bytes",
			cond(okF, fmtMs(floor)), cond(ok, fmtMs(v)), v / floor, okF && ok, v <= 2*floor})
	}

	// Against the peers.
	ahead := func(measure string, f func(sample) (float64, bool), format func(float64) string, larger bool) {
		serve, okS := get("sharedos-mcp", f)
		var there []string
		worst, ok := math.Inf(1), okS
		for _, p := range budgetPeers {
			v, okP := get(p.key, f)
			there = append(there, p.name+" "+cond(okP, format(v)))
			ratio := v / serve
			if larger {
				ratio = serve / v
			}
			ok = ok && okP
			worst = min(worst, ratio)
		}
		rows = append(rows, target{measure, "≥ 4× ahead", "Go SDK and TS SDK relays", strings.Join(there, "; "), cond(okS, format(serve)), worst, ok, worst >= 4})
	}
	ahead("tools/call p50", p50, fmtUs, false)
	ahead("pipelined calls", rate, fmtRate, true)
	for _, k := range payloadKinds {
		ahead(fmtSize(targetPayload)+" "+k.String()+", call to answer", payloadMs(k, targetPayload), fmtMs, false)
	}
	ahead(fmt.Sprintf("first `tools/list`, %d tools", last), list, fmtMs, false)
	within := func(measure string, f func(sample) (float64, bool), format func(float64) string) {
		serve, okS := get("sharedos-mcp", f)
		g, okG := get("gosdk", f)
		n, okN := get("node", f)
		rows = append(rows,
			target{measure, "≤ 1.25×", "Go SDK relay", cond(okG, format(g)), cond(okS, format(serve)), serve / g, okS && okG, serve <= 1.25*g},
			target{"the same", "≥ 20× ahead", "TS SDK relay", cond(okN, format(n)), cond(okS, format(serve)), n / serve, okS && okN, n >= 20*serve})
	}
	within("cold start to `initialize` answered (connect, peer check, hello)", cold, fmtMs)
	within("peak RSS, session ended after `initialize`", coldRSS, fmtMB)

	// serve itself.
	rss, okS := get("sharedos-mcp", func(s sample) (float64, bool) { return countOf(s.rssLoad[targetPayload]) })
	rows = append(rows, target{"peak RSS of `serve` relaying " + fmtSize(targetPayload), "≤ 32 MiB", "–", "–",
		cond(okS, fmtMB(rss)), rss / maxServeRSS, okS, rss <= maxServeRSS})
	src := r.source
	rows = append(rows,
		target{"assembly (`.s` files in the module)", "none", "–", "–", sourceList(src.asm), math.NaN(), src.scanned, len(src.asm) == 0},
		target{"`unsafe` imports", "only where a system call needs it", "–", "–", sourceList(src.unsafe), math.NaN(), src.scanned, len(src.unsafeNoSyscall) == 0},
		target{"`mmap` outside the benchmarks", "none", "–", "–", sourceList(src.mmap), math.NaN(), src.scanned, len(src.mmap) == 0},
	)
	return rows
}

// maxServeRSS is serve's peak RSS budget relaying targetPayload.
const maxServeRSS = 32 << 20

// versionFloor names the spawn floor of serve's own binary doing nothing.
const versionFloor = "sharedos-mcp version"

// lockstepAdded is what the lockstep relay adds to a direct call at p50:
// the least any relay adds on this machine.
func (r *report) lockstepAdded() (float64, bool) {
	p50 := func(s sample) (float64, bool) { return usOf(s.synth.p50) }
	l, okL := r.med("lockstep", p50)
	d, okD := r.med("direct", p50)
	return l - d, okL && okD
}

func cond(ok bool, s string) string {
	if ok {
		return s
	}
	return "not measured"
}

func (r *report) allInOrder(key string) bool {
	for _, s := range r.results[key] {
		if !s.synth.inOrder {
			return false
		}
	}
	return true
}

// analysis says, from the numbers above, what each figure is made of,
// so a missed budget comes with what it is made of.
func (r *report) analysis(w io.Writer) {
	_, okS := r.peer("sharedos-mcp")
	_, okD := r.peer("direct")
	if !okS || !okD || len(r.spawns) < 3 {
		return
	}
	mets := metrics()
	v := func(key, name string) float64 {
		p, ok := r.peer(key)
		if !ok {
			return 0
		}
		x, _ := r.value(metricNamed(mets, name), p)
		return x
	}
	// minimal is "; the minimal relay: X" when it was measured.
	minimal := func(name string, format func(float64) string) string {
		if _, ok := r.peer("minrelay"); !ok {
			return ""
		}
		return "; the minimal relay: " + format(v("minrelay", name))
	}
	fmt.Fprintf(w, "\n## What the numbers are made of\n\n")

	cold, directCold, echoCold, goStart := v("sharedos-mcp", "cold start:"), v("direct", "cold start:"), v("echo", "cold start:"), ms(r.spawns[1].d)
	coldFaults, pageCost := v("sharedos-mcp", "minor page faults, spawn"), us(r.fault)
	echoFaults := v("echo", "minor page faults, spawn")
	fmt.Fprintf(w, "- **Cold start, %s.** Spawning echo and reading its first line back takes %s here (an empty static Go binary spawned to exit: %s; /bin/true: %s), and a running process dials the kernel and has hello answered in %s. serve takes %.0f minor page faults from spawn to exit after initialize, echo %.0f; one fault costs %s here, so the %.0f faults more come to about %s. The rest of what serve adds is the runtime and package initialisation of a larger program (most of it the packages the broker's Go MCP SDK links, which every command initialises: docs/adr/0023) and its own dial, peer check and hello.\n",
		fmtMs(cold), fmtMs(echoCold), fmtMs(goStart), fmtMs(ms(r.spawns[0].d)), fmtMs(directCold),
		coldFaults, echoFaults, fmtUs(pageCost), max(0, coldFaults-echoFaults), fmtMs(max(0, coldFaults-echoFaults)*pageCost/1000))

	for _, k := range []string{"synthetic", "reference"} {
		name := "tools/call sequential p50, " + k + " kernel"
		added := v("sharedos-mcp", name) - v("direct", name)
		line := fmt.Sprintf("- **Added latency, %s kernel: %s at p50** (serve %s, direct %s", k, fmtUs(added), fmtUs(v("sharedos-mcp", name)), fmtUs(v("direct", name)))
		if _, ok := r.peer("minrelay"); ok {
			line += fmt.Sprintf("; the minimal relay adds %s", fmtUs(v("minrelay", name)-v("direct", name)))
		}
		fmt.Fprintf(w, "%s). A relayed call crosses one more pipe each way than a direct one; echo's round trip, which is only that, is %s at p50 here.", line, fmtUs(v("echo", "tools/call sequential p50, synthetic kernel")))
		if lock, ok := r.lockstepAdded(); ok && k == "synthetic" {
			fmt.Fprintf(w, " But a relay wakes twice per call where echo wakes once (for the request, and for the kernel's answer), each time with a read and a write of its own: the lockstep relay, which does only that, on one thread with blocking reads, adds %s, so serve adds %s beyond the least any relay does here.", fmtUs(lock), fmtUs(max(0, added-lock)))
		}
		fmt.Fprintln(w)
	}

	for _, k := range payloadKinds {
		floor, d, e, ok := r.payloadFloor(k, targetPayload)
		if !ok {
			continue
		}
		s := v("sharedos-mcp", fmt.Sprintf("%s %s", fmtSize(targetPayload), k))
		fmt.Fprintf(w, "- **%s %s: %s** against a floor of %s (direct %s + echo %s); serve spends %s more than the floor on it.\n",
			fmtSize(targetPayload), k, fmtMs(s), fmtMs(floor), fmtMs(d), fmtMs(e), fmtMs(max(0, s-floor)))
	}

	last := catalogueSizes[len(catalogueSizes)-1]
	first, again := v("sharedos-mcp", fmt.Sprintf("tools/list of %d, first", last)), v("sharedos-mcp", fmt.Sprintf("tools/list of %d, again", last))
	faults := v("sharedos-mcp", "minor page faults, session listing") - coldFaults
	fmt.Fprintf(w, "- **First tools/list of %d tools, %s** (again: %s; direct: %s%s). The session that lists takes %.0f more minor page faults than one that only answers initialize, about %s of memory touched for the first time, which at %s a fault is about %s of it. BenchmarkFirstList512 below is the same work in a warm process.\n",
		last, fmtMs(first), fmtMs(again), fmtMs(v("direct", fmt.Sprintf("tools/list of %d, first", last))), minimal(fmt.Sprintf("tools/list of %d, first", last), fmtMs),
		faults, fmtMB(faults*4096), fmtUs(pageCost), fmtMs(faults*pageCost/1000))

	rate := "tools/call pipelined throughput, synthetic kernel"
	fmt.Fprintf(w, "- **Pipelined, synthetic kernel: %s** (direct: %s; echo: %s%s). serve runs on one P (GOMAXPROCS 1); the minimal relay on every core.\n",
		fmtRate(v("sharedos-mcp", rate)), fmtRate(v("direct", rate)), fmtRate(v("echo", rate)), minimal(rate, fmtRate))
	fmt.Fprintf(w, "- **Peak RSS.** %s after initialize alone, %s in the calls sessions, %s listing %d tools, %s relaying %s payloads.\n",
		fmtMB(v("sharedos-mcp", "peak RSS, session ended")), fmtMB(v("sharedos-mcp", "peak RSS, calls")), fmtMB(v("sharedos-mcp", "peak RSS, session listing")), last,
		fmtMB(v("sharedos-mcp", "peak RSS, session relaying")), fmtSize(targetPayload))
	fmt.Fprintf(w, "- **The reference kernel's decoding: %s** for a %s argument, %s `json.Valid` over the same bytes (%s). It includes reading the line from the socket.\n",
		fmtMs(ms(r.decode)), fmtSize(targetPayload), fmtMs(ms(r.valid)), fmtX(float64(r.decode)/float64(r.valid)))
	fmt.Fprintf(w, "\nThe load average (1, 5, 15 min) was %s at the start of the run and %s at the end; on a quieter machine every figure above is lower, the floors included.\n", r.loadStart, r.loadEnd)
}

// leftOutNote lists the peers' runs that failed, for the machine section:
// their medians are of the other runs.
func (r *report) leftOutNote() string {
	if len(r.leftOut) == 0 {
		return ""
	}
	return "\nLeft out of the medians, each a peer's run that failed: " + strings.Join(r.leftOut, "; ") + ".\n"
}

func metricNamed(ms []metric, prefix string) metric {
	for _, m := range ms {
		if strings.HasPrefix(m.name, prefix) {
			return m
		}
	}
	panic("no metric " + prefix)
}

// document writes BENCHMARKS.md.
func (r *report) document(w io.Writer) error {
	o := r.opts
	fmt.Fprintf(w, `# Benchmarks

Generated by `+"`make bench-relay`"+` (`+"`go run ./bench/cmd/benchrelay -markdown -keep BENCHMARKS.md`"+`) on %s. Do not edit by hand: rerun it.

## What is measured

One MCP client reaches the same kernel in several ways. Three are floors, measured in the same run, that budgets are ratios to:

- **echo (floor)**: bench/cmd/echo, spawned the way a harness spawns serve, copies every stdin line to stdout. It is the cost of starting a small static Go binary and of one more pipe hop each way, for a message of any size.
- **direct (floor)**: the client speaks NDJSON JSON-RPC to the kernel's socket itself (integration.hello, tools.list, tools.invoke). Nothing to spawn.
- **minimal relay (floor)**: bench/cmd/minrelay, the simplest correct relay on a page of Go, written the usual way (encoding/json, buffered I/O, calls pipelined, answers in arrival order by a FIFO of ids, the catalogue fetched, SHA-256'd and forwarded). What anyone could do.

One more floor shows what no relay can beat:

- **lockstep relay (floor)**: bench/cmd/lockstep, the least any relay can do for one call at a time: one thread, blocking reads and writes, for each tools/call one tools.invoke written, its answer read and one result written, the JSON touched only to find the id, the tool, the arguments and the content. It is not a correct relay (nothing pipelined, no ping during a call, no peer check), so it is measured only for cold start and calls, and held to no budget.

And three relays, of which the two SDK ones are the peers serve's budgets hold it ahead of:

- **sharedos-mcp serve**: built with the release flags (`+"`CGO_ENABLED=0 -trimpath -ldflags '-s -w'`"+`), like every Go binary here.
- **Go SDK v1.8.0**: bench/gosdk, a relay on `+"`mcp.NewServer`"+` + `+"`mcp.StdioTransport`"+` relaying to the kernel with kernelclient.
- **TS SDK 1.32.2 (Node)**: bench/node/bridge.mjs, a relay on the TypeScript SDK's `+"`Server`"+` + `+"`StdioServerTransport`"+`.

Every relay connects to the kernel and says hello before answering initialize, and fetches the catalogue on the first tools/list or tools/call. sharedos-mcp does more on that path than the others: it checks the kernel's peer credentials (the Go SDK peer does too, through kernelclient), projects the catalogue and recomputes its catalogHash, and keeps answers in arrival order (the minimal relay does too).

Kernels: a synthetic one in the harness (bench/internal/synth) that does almost no work per request, so that what is measured is the relay; it serves catalogues of realistic tools (0.9–1.4 KB each, correct catalogHash) and payload calls whose argument carries, or whose result returns, a JSON string of a given size that reads like source code (an escape every twelve bytes or so), in either result shape a kernel may use: one text block in `+"`content`"+`, or an `+"`output`"+` object that a relay must turn into text. And the reference kernel (`+"`sharedos-mcp kernel`"+`, every file tool granted), which checks the grant and appends an audit line per call: calls are `+"`files.read`"+` of a %d-byte file.

Per run and peer: %d cold starts against each kernel (median taken); a calls session per kernel (%d warm-up calls, %d sequential calls timed one by one, then %d calls written without waiting: throughput is calls over the time to the last answer, and the answers' order is checked); one fresh session per catalogue size timing its first and second tools/list; one session per payload size timing, per kind, one call and then %d more (their median). Peak RSS is the peer's VmHWM from /proc, read just before its stdin closes; page faults are wait4's minor-fault count. Size on disk is the binary, or for Node the node binary plus bridge.mjs and node_modules. %d runs, peers in a rotated order; every figure is the median of the runs.

## Machine

- CPUs: %d × %s
- Linux %s, %s, Node %s
- load average (1, 5, 15 min) at start: %s; at end: %s

The machine is shared with other engineers' builds and tests (see the load averages), so the numbers are noisy. Medians of repeated runs damp that; the ratios to floors measured interleaved in the same runs are steadier than the absolute figures.
%s
## Results

`, time.Now().UTC().Format("2006-01-02 15:04 UTC"), len(noteContent), o.cold, o.load.warmup, o.load.sequential, o.load.pipelined, o.payloadReps, o.runs,
		runtime.NumCPU(), cpuModel(), osRelease(), commandLine("go", "version"), commandLine("node", "--version"), r.loadStart, r.loadEnd, r.leftOutNote())
	r.tables(w)
	r.analysis(w)
	fmt.Fprintf(w, "\n## Commands\n\n```\n%s```\n", strings.Join([]string{
		"make bench-relay    # this file: npm ci --prefix bench/node, then go run ./bench/cmd/benchrelay -markdown -keep BENCHMARKS.md",
		"make bench          # the go test benchmarks alone",
		"go run ./bench/cmd/benchrelay -peers direct,minrelay,sharedos-mcp -shim PATH    # the tables for another build, to compare",
		"go test -run '^$' -bench 'Payload|FirstList512' -cpuprofile cpu.out ./bench/internal/synth    # profile one path in process",
		"go test -run '^$' -bench ReferenceKernel -cpuprofile cpu.out ./bench/internal/synth    # the reference kernel's decoding",
		"",
	}, "\n"))
	if r.telemetry != "" {
		fmt.Fprintf(w, "\n## Telemetry's cost\n\n%s\n`%s`:\n\n```\n%s```\n", telemetrySummary(r.telemetry), telemetryCommand, r.telemetry)
	}
	if r.micro != "" {
		fmt.Fprintf(w, "\n## Micro-benchmarks\n\n`go test -run '^$' -bench . -benchmem -count 5 %s`:\n\n```\n%s```\n", strings.Join(microPackages, " "), r.micro)
	}
	if r.kept != "" {
		fmt.Fprintf(w, "\n%s", r.kept)
	}
	return nil
}

// telemetrySummary says, from BenchmarkCallWithTelemetry's output, what
// export adds to a call through the reference kernel: the median of each
// variant's runs, and the difference to off.
func telemetrySummary(out string) string {
	runs := map[string][]float64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkCallWithTelemetry/") || f[3] != "ns/op" {
			continue
		}
		name := strings.TrimPrefix(f[0], "BenchmarkCallWithTelemetry/")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		if ns, err := strconv.ParseFloat(f[2], 64); err == nil {
			runs[name] = append(runs[name], ns)
		}
	}
	med := func(name string) float64 {
		v := slices.Clone(runs[name])
		slices.Sort(v)
		if len(v) == 0 {
			return 0
		}
		return v[len(v)/2]
	}
	off := med("off")
	return fmt.Sprintf("A files.read through the reference kernel, sequential (BenchmarkCallWithTelemetry; median of the runs): "+
		"**%.1f µs** without [telemetry]; **%.1f µs** (%+.1f µs) exporting a span and the metrics of each call; "+
		"**%.1f µs** (%+.1f µs) with every audit line exported as a log record too (audit_logs). "+
		"Export runs beside the call, on the machine's other core; what it adds is mostly that work competing for the cores, "+
		"and without [telemetry] a call allocates nothing for it (kernel.TestTelemetryOffCostsACallNothing).\n",
		off/1e3, med("traces-metrics")/1e3, (med("traces-metrics")-off)/1e3, med("traces-metrics-audit")/1e3, (med("traces-metrics-audit")-off)/1e3)
}

// markedSections returns each section of text that runs from a line
// "<!-- NAME:begin -->" to the line "<!-- NAME:end -->", in order, each
// ending in a newline and separated by a blank line: what other commands
// (bench/cmd/benchremote) wrote into BENCHMARKS.md, which a rerun of
// this one keeps. Of two sections of one name, the later is kept.
func markedSections(text string) string {
	var kept []string
	at := map[string]int{} // a name's index in kept
	for {
		i := strings.Index(text, "<!-- ")
		if i < 0 {
			break
		}
		name, rest, ok := strings.Cut(text[i+len("<!-- "):], ":begin -->")
		if !ok || strings.ContainsAny(name, " \n") {
			text = text[i+len("<!-- "):]
			continue
		}
		end := "<!-- " + name + ":end -->"
		j := strings.Index(rest, end)
		if j < 0 {
			break
		}
		section := text[i:len(text)-len(rest)+j+len(end)] + "\n"
		if k, ok := at[name]; ok {
			kept[k] = section
		} else {
			at[name] = len(kept)
			kept = append(kept, section)
		}
		text = rest[j+len(end):]
	}
	return strings.Join(kept, "\n")
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
