// Command benchrelay measures what relaying costs: one client calling the
// reference kernel directly, and the same client going through
// `sharedos-mcp serve`, through a relay built on the official Go MCP SDK
// (bench/gosdk) and through one built on the official TypeScript SDK
// (bench/node). It builds the binaries with the release flags, runs the
// reference kernel as a subprocess and a synthetic kernel
// (bench/internal/synth) for catalogue sizes, repeats every measurement
// and reports medians. With -markdown it writes the whole of
// BENCHMARKS.md, including the go test micro-benchmarks.
//
// Run it from the module root: go run ./bench/cmd/benchrelay -markdown
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sharedos/sharedos-mcp/bench/internal/synth"
)

// The file every relayed call reads: small, so the numbers are the
// relay's and not the file system's.
const (
	noteName    = "note.txt"
	noteContent = "The relay adds a hop, not a policy: every call is authorized by the kernel."
)

// catalogueSizes are the tools/list sizes measured; the last is the
// protocol's maximum.
var catalogueSizes = []int{1, 64, 512}

type options struct {
	runs, cold int
	load       callLoad
	peers      string
	markdown   bool
	micro      bool
	shim       string
}

func main() {
	var o options
	flag.IntVar(&o.runs, "runs", 5, "repeat every measurement this many times and report medians")
	flag.IntVar(&o.cold, "cold", 10, "cold starts per peer per run")
	flag.IntVar(&o.load.warmup, "warmup", 200, "calls before timing sequential calls")
	flag.IntVar(&o.load.sequential, "calls", 2000, "sequential calls timed per run")
	flag.IntVar(&o.load.pipelined, "pipelined", 20000, "calls written without waiting, per run")
	flag.StringVar(&o.peers, "peers", "direct,sharedos-mcp,gosdk,node", "comma-separated peers to measure")
	flag.BoolVar(&o.markdown, "markdown", false, "write BENCHMARKS.md to stdout: machine, commands, tables and micro-benchmarks")
	flag.BoolVar(&o.micro, "micro", true, "with -markdown, also run the go test micro-benchmarks")
	flag.StringVar(&o.shim, "shim", "", "measure this sharedos-mcp `binary` instead of building one from the tree (to compare builds)")
	flag.Parse()
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchrelay: error:", err)
		os.Exit(1)
	}
}

func run(o options, out io.Writer) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return fmt.Errorf("run from the module root: %w", err)
	}
	work, err := os.MkdirTemp("", "br")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	loadStart := loadavg()
	progress("building sharedos-mcp and the Go SDK peer with the release flags")
	shimBin := filepath.Join(work, "sharedos-mcp")
	gosdkBin := filepath.Join(work, "gosdk-peer")
	if o.shim != "" {
		if shimBin, err = filepath.Abs(o.shim); err != nil {
			return err
		}
	} else if err := goBuild(shimBin, "."); err != nil {
		return err
	}
	if err := goBuild(gosdkBin, "./bench/gosdk"); err != nil {
		return err
	}
	floorBin := filepath.Join(work, "gofloor")
	if err := goBuild(floorBin, "./bench/cmd/gofloor"); err != nil {
		return err
	}
	stdioBin := filepath.Join(work, "stdiofloor")
	if err := goBuild(stdioBin, "./bench/cmd/stdiofloor"); err != nil {
		return err
	}
	stdioPeer := peer{key: "stdiofloor", label: "stdiofloor", command: func(string) *exec.Cmd { return exec.Command(stdioBin, noteContent) }}
	floorCmds := [][]string{{"/bin/true"}, {floorBin}, {shimBin, "version"}}
	floorNames := []string{"/bin/true", "an empty static Go binary (bench/cmd/gofloor)", "sharedos-mcp version"}
	all := map[string]peer{
		"direct": {key: "direct", label: "direct (floor)"},
		"sharedos-mcp": {key: "sharedos-mcp", label: "sharedos-mcp serve", size: fileSize(shimBin),
			command: func(s string) *exec.Cmd {
				return exec.Command(shimBin, "serve", "--integration", "bench", "--socket", s, "--log-level", "error")
			}},
		"gosdk": {key: "gosdk", label: "Go SDK v1.8.0", size: fileSize(gosdkBin),
			command: func(s string) *exec.Cmd { return exec.Command(gosdkBin, "-socket", s) }},
	}
	var peers []peer
	for _, k := range strings.Split(o.peers, ",") {
		if k == "node" {
			p, err := nodePeer()
			if err != nil {
				return err
			}
			all[k] = p
		}
		p, ok := all[k]
		if !ok {
			return fmt.Errorf("unknown peer %q: use direct, sharedos-mcp, gosdk, node", k)
		}
		peers = append(peers, p)
	}

	kern, err := startKernel(shimBin, work)
	if err != nil {
		return err
	}
	defer kern.stop()
	synthSock := map[int]string{}
	for _, n := range catalogueSizes {
		path := filepath.Join(work, fmt.Sprintf("s%d.sock", n))
		k, err := synth.Listen(path, synth.Tools(n))
		if err != nil {
			return err
		}
		defer k.Close()
		synthSock[n] = path
	}

	results := map[string][]sample{}
	floors := make([][]time.Duration, len(floorCmds))
	floorFaults := make([][]int64, len(floorCmds))
	var faults []time.Duration
	var hops []callStats
	for r := range o.runs {
		hop, _, err := calls(stdioPeer, callTarget{tool: "files.read", args: "{}", want: noteContent}, o.load)
		if err != nil {
			return fmt.Errorf("stdio floor: %w", err)
		}
		hops = append(hops, hop)
		for i, argv := range floorCmds {
			d, f, err := spawnTime(argv, o.cold)
			if err != nil {
				return err
			}
			floors[i] = append(floors[i], d)
			floorFaults[i] = append(floorFaults[i], f)
		}
		fault, err := faultCost()
		if err != nil {
			return err
		}
		faults = append(faults, fault)
		// Rotate the order so that no peer always runs first or last.
		for i := range peers {
			p := peers[(i+r)%len(peers)]
			progress("run %d/%d: %s", r+1, o.runs, p.label)
			s, err := measure(p, kern.socket, synthSock, o)
			if err != nil {
				return fmt.Errorf("%s: %w", p.label, err)
			}
			results[p.key] = append(results[p.key], s)
		}
		// The audit log gets a line per call; keep it from growing across
		// runs (the kernel appends, so truncating under it is safe).
		os.Truncate(kern.audit, 0)
	}
	rep := report{opts: o, peers: peers, results: results, loadStart: loadStart, loadEnd: loadavg()}
	for i, name := range floorNames {
		rep.spawns = append(rep.spawns, spawnFloor{name, median(floors[i]), median(floorFaults[i])})
	}
	rep.fault = median(faults)
	var p50, p99 []time.Duration
	var rates []float64
	for _, h := range hops {
		p50, p99, rates = append(p50, h.p50), append(p99, h.p99), append(rates, h.rate)
	}
	rep.hop = callStats{p50: median(p50), p99: median(p99), rate: median(rates)}
	if !o.markdown {
		rep.tables(out)
		return nil
	}
	if o.micro {
		progress("running the go test micro-benchmarks")
		if rep.micro, err = microBenchmarks(); err != nil {
			return err
		}
	}
	rep.loadEnd = loadavg()
	return rep.document(out)
}

// measure runs one peer through everything once.
func measure(p peer, kernelSock string, synthSock map[int]string, o options) (sample, error) {
	cold, u, err := coldStart(p, kernelSock, o.cold)
	if err != nil {
		return sample{}, fmt.Errorf("cold start: %w", err)
	}
	s := sample{cold: cold, coldFault: u.faults, coldRSS: u.rss, listFirst: map[int]time.Duration{}}
	ref := callTarget{socket: kernelSock, tool: "files.read", args: `{"path":"/` + noteName + `"}`, want: noteContent}
	s.ref, s.rssCalls, err = calls(p, ref, o.load)
	if err != nil {
		return sample{}, fmt.Errorf("calls through the reference kernel: %w", err)
	}
	var rss int64
	syn := callTarget{socket: synthSock[catalogueSizes[0]], tool: synth.FirstTool, args: `{"query":"relay"}`, want: synth.Answer}
	s.synth, rss, err = calls(p, syn, o.load)
	if err != nil {
		return sample{}, fmt.Errorf("calls through the synthetic kernel: %w", err)
	}
	s.rssCalls = max(s.rssCalls, rss)
	for _, n := range catalogueSizes {
		first, again, u, err := listTimes(p, synthSock[n], n)
		if err != nil {
			return sample{}, fmt.Errorf("tools/list of %d: %w", n, err)
		}
		s.listFirst[n] = first
		s.listAgain = again
		s.listFault = u.faults
		s.rssList = u.rss
	}
	return s, nil
}

// spawnTime is the median time to start argv and see it exit, n times.
func spawnTime(argv []string, n int) (time.Duration, int64, error) {
	ds := make([]time.Duration, n)
	fs := make([]int64, n)
	for i := range ds {
		start := time.Now()
		cmd := exec.Command(argv[0], argv[1:]...)
		if err := cmd.Run(); err != nil {
			return 0, 0, fmt.Errorf("%s: %w", argv[0], err)
		}
		ds[i] = time.Since(start)
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			fs[i] = ru.Minflt
		}
	}
	return median(ds), median(fs), nil
}

// faultCost is what the first touch of one page of fresh memory costs on
// this machine: the unit in which a new process pays for the memory it
// uses, as every page it touches for the first time is a minor fault.
func faultCost() (time.Duration, error) {
	const pages = 4096
	size := pages * os.Getpagesize()
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return 0, fmt.Errorf("page fault floor: %w", err)
	}
	defer syscall.Munmap(b)
	start := time.Now()
	for i := 0; i < size; i += os.Getpagesize() {
		b[i] = 1
	}
	return time.Since(start) / pages, nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchrelay: "+format+"\n", args...)
}

// goBuild builds pkg as the release does (Makefile build, goreleaser):
// static, trimmed, stripped.
func goBuild(out, pkg string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	return nil
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// nodePeer is the TypeScript SDK bridge on the node found in PATH. Its
// size is what it takes to run it: the node binary and node_modules.
func nodePeer() (peer, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return peer{}, fmt.Errorf("node not found: %w (install Node 20, or leave node out of -peers)", err)
	}
	dir, err := filepath.Abs("bench/node")
	if err != nil {
		return peer{}, err
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		return peer{}, fmt.Errorf("bench/node has no node_modules: run npm ci --prefix bench/node")
	}
	size := fileSize(node) + fileSize(filepath.Join(dir, "bridge.mjs"))
	filepath.WalkDir(filepath.Join(dir, "node_modules"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				size += fi.Size()
			}
		}
		return nil
	})
	return peer{key: "node", label: "TS SDK 1.32.2 (Node)", size: size,
		command: func(s string) *exec.Cmd {
			cmd := exec.Command(node, filepath.Join(dir, "bridge.mjs"), "--socket", s)
			cmd.Dir = dir
			return cmd
		}}, nil
}

type kernelProc struct {
	cmd           *exec.Cmd
	socket, audit string
}

// startKernel runs the reference kernel over a root holding the note, with
// its default grants (read-only files to every integration), and waits
// until its socket accepts.
func startKernel(bin, work string) (*kernelProc, error) {
	root := filepath.Join(work, "root")
	if err := os.Mkdir(root, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(root, noteName), []byte(noteContent), 0o600); err != nil {
		return nil, err
	}
	k := &kernelProc{socket: filepath.Join(work, "k.sock"), audit: filepath.Join(work, "audit.jsonl")}
	k.cmd = exec.Command(bin, "kernel", "--root", root, "--socket", k.socket, "--audit", k.audit, "--log-level", "error")
	k.cmd.Stderr = os.Stderr
	if err := k.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kernel: %w", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("unix", k.socket)
		if err == nil {
			c.Close()
			return k, nil
		}
		if time.Now().After(deadline) {
			k.stop()
			return nil, fmt.Errorf("kernel socket %s never accepted: %w", k.socket, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (k *kernelProc) stop() {
	k.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { k.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		k.cmd.Process.Kill()
		<-done
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// microPackages hold the hot-path benchmarks: framing, projection and
// hashing, one relayed call, the first tools/list of 512 tools.
var microPackages = []string{"./internal/jsonrpc", "./hashing", "./shim", "./bench/internal/synth"}

// microBenchmarks runs the hot-path benchmarks and returns their output.
func microBenchmarks() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args := append([]string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-count", "5", "-timeout", "600s"}, microPackages...)
	cmd := exec.CommandContext(ctx, "go", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go test -bench: %w\n%s", err, out)
	}
	return string(out), nil
}
