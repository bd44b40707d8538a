// Command benchrelay measures what relaying costs: one client calling the
// reference kernel directly, and the same client going through
// `sharedos-mcp serve`, through a relay built on the official Go MCP SDK
// (bench/gosdk) and through one built on the official TypeScript SDK
// (bench/node). It builds the binaries with the release flags, runs the
// reference kernel as a subprocess and a synthetic kernel
// (bench/internal/synth) for catalogue sizes, repeats every measurement
// and reports medians. With -markdown it writes the whole of
// BENCHMARKS.md, including the go test micro-benchmarks, and with -keep
// the sections other commands wrote there (between their
// <!-- NAME:begin --> and <!-- NAME:end --> markers) after its own.
//
// Run it from the module root: go run ./bench/cmd/benchrelay -markdown -keep BENCHMARKS.md
package main

import (
	"context"
	"errors"
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

	"github.com/sharedos/sharedos-mcp/bench/internal/host"
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
var catalogueSizes = []int{1, 16, 64, 256, 512}

// payloadSizes are the payload sizes measured, as JSON strings on the
// wire; the last still fits a 16 MiB line in every shape the kernel sends.
var payloadSizes = []int{64 << 10, 256 << 10, 1 << 20, 4 << 20, 15 << 20}

// targetPayload is the payload size the targets name.
const targetPayload = 4 << 20

type options struct {
	runs, cold  int
	load        callLoad
	payloadReps int
	peers       string
	markdown    bool
	micro       bool
	keep        string // a BENCHMARKS.md whose marked sections the document keeps
	shim        string
	profile     string // a scenario to run alone (see profileScenario)
	wrap        string // a command line to run every spawned peer under
}

func main() {
	var o options
	flag.IntVar(&o.runs, "runs", 7, "repeat every measurement this many times and report medians")
	flag.IntVar(&o.cold, "cold", 10, "cold starts per peer per run")
	flag.IntVar(&o.load.warmup, "warmup", 200, "calls before timing sequential calls")
	flag.IntVar(&o.load.sequential, "calls", 2000, "sequential calls timed per run")
	flag.IntVar(&o.load.pipelined, "pipelined", 20000, "calls written without waiting, per run")
	flag.IntVar(&o.payloadReps, "payload-reps", 7, "payload calls timed per kind and size, per run, after a first one")
	flag.StringVar(&o.peers, "peers", "direct,minrelay,sharedos-mcp,gosdk,node", "comma-separated peers to measure besides echo and the lockstep relay, the floors always measured")
	flag.BoolVar(&o.markdown, "markdown", false, "write BENCHMARKS.md to stdout: machine, commands, tables and micro-benchmarks")
	flag.BoolVar(&o.micro, "micro", true, "with -markdown, also run the go test micro-benchmarks")
	flag.StringVar(&o.keep, "keep", "", "with -markdown, end the document with the sections other commands marked in this `file`")
	flag.StringVar(&o.shim, "shim", "", "measure this sharedos-mcp `binary` instead of building one from the tree (to compare builds)")
	flag.StringVar(&o.profile, "profile", "", "run one `scenario` alone against the synthetic kernel, once per peer, for a profiler: "+strings.Join(scenarioNames(), ", "))
	flag.StringVar(&o.wrap, "wrap", "", "with -profile, run each spawned peer under this `command` line, split at spaces (e.g. 'strace -f -c -o /tmp/serve.strace')")
	flag.Parse()
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchrelay: error:", err)
		os.Exit(1)
	}
}

// kernels are the sockets a run measures against.
type kernels struct {
	ref     *kernelProc
	synth   map[int]string // catalogue size → socket
	payload string         // synth.PayloadTools
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

	loadStart := host.LoadAvg()
	progress("building sharedos-mcp, the floors and the Go SDK peer with the release flags")
	bin := func(name string) string { return filepath.Join(work, name) }
	shimBin := bin("sharedos-mcp")
	if o.shim != "" {
		if shimBin, err = filepath.Abs(o.shim); err != nil {
			return err
		}
	} else if err := goBuild(shimBin, "."); err != nil {
		return err
	}
	for _, b := range []struct{ out, pkg string }{
		{"gosdk-peer", "./bench/gosdk"}, {"gofloor", "./bench/cmd/gofloor"}, {"echo", "./bench/cmd/echo"}, {"minrelay", "./bench/cmd/minrelay"},
		{"lockstep", "./bench/cmd/lockstep"},
	} {
		if err := goBuild(bin(b.out), b.pkg); err != nil {
			return err
		}
	}
	floorCmds := [][]string{{"/bin/true"}, {bin("gofloor")}, {shimBin, "version"}}
	floorNames := []string{"/bin/true", "an empty static Go binary (bench/cmd/gofloor)", versionFloor}
	echo := peer{key: "echo", label: "echo (floor)", echo: true, size: fileSize(bin("echo")),
		command: func(string) *exec.Cmd { return exec.Command(bin("echo")) }}
	lockstep := peer{key: "lockstep", label: "lockstep relay (floor)", lockstep: true, size: fileSize(bin("lockstep")),
		command: func(s string) *exec.Cmd { return exec.Command(bin("lockstep"), "-socket", s) }}
	all := map[string]peer{
		"direct": {key: "direct", label: "direct (floor)"},
		"minrelay": {key: "minrelay", label: "minimal relay (floor)", size: fileSize(bin("minrelay")),
			command: func(s string) *exec.Cmd { return exec.Command(bin("minrelay"), "-socket", s) }},
		"sharedos-mcp": {key: "sharedos-mcp", label: "sharedos-mcp serve", size: fileSize(shimBin),
			command: func(s string) *exec.Cmd {
				return exec.Command(shimBin, "serve", "--integration", "bench", "--socket", s, "--log-level", "error")
			}},
		"gosdk": {key: "gosdk", label: "Go SDK v1.8.0", size: fileSize(bin("gosdk-peer")),
			command: func(s string) *exec.Cmd { return exec.Command(bin("gosdk-peer"), "-socket", s) }},
	}
	peers := []peer{echo, lockstep}
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
			return fmt.Errorf("unknown peer %q: use direct, minrelay, sharedos-mcp, gosdk, node", k)
		}
		peers = append(peers, p)
	}

	var ks kernels
	if ks.ref, err = startKernel(shimBin, work); err != nil {
		return err
	}
	defer ks.ref.stop()
	ks.synth = map[int]string{}
	for _, n := range catalogueSizes {
		path := filepath.Join(work, fmt.Sprintf("s%d.sock", n))
		k, err := synth.Listen(path, synth.Tools(n))
		if err != nil {
			return err
		}
		defer k.Close()
		ks.synth[n] = path
	}
	ks.payload = filepath.Join(work, "payload.sock")
	pk, err := synth.Listen(ks.payload, synth.PayloadTools())
	if err != nil {
		return err
	}
	defer pk.Close()

	if o.profile != "" {
		return profileScenario(o, peers, ks, out)
	}
	rep := report{opts: o, peers: peers, results: map[string][]sample{}, loadStart: loadStart}
	if rep.source, err = scanSource("."); err != nil {
		return fmt.Errorf("read the module's source: %w", err)
	}
	floors := make([][]time.Duration, len(floorCmds))
	floorFaults := make([][]int64, len(floorCmds))
	var faults, decodes, valids []time.Duration
	ps := payloads{}
	for r := range o.runs {
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
		progress("run %d/%d: the reference kernel decoding a %d-byte argument", r+1, o.runs, targetPayload)
		decode, valid, err := kernelDecode(ks.ref.socket, ps.get(targetPayload), 7)
		if err != nil {
			return fmt.Errorf("reference kernel decode: %w", err)
		}
		decodes, valids = append(decodes, decode), append(valids, valid)
		// Rotate the order so that no peer always runs first or last.
		for i := range peers {
			p := peers[(i+r)%len(peers)]
			progress("run %d/%d: %s", r+1, o.runs, p.label)
			s, err := measure(p, ks, ps, o)
			if err != nil {
				// One peer's failure (the Node peer has lost a 15 MiB
				// session on a loaded machine) costs its figures of
				// this run, not the run: the report says so.
				note := fmt.Sprintf("run %d: %s: %v", r+1, p.label, err)
				progress("%s; its figures of this run are left out", note)
				rep.leftOut = append(rep.leftOut, note)
				continue
			}
			rep.results[p.key] = append(rep.results[p.key], s)
		}
		// The audit log gets a line per call; keep it from growing across
		// runs (the kernel appends, so truncating under it is safe).
		os.Truncate(ks.ref.audit, 0)
	}
	for i, name := range floorNames {
		rep.spawns = append(rep.spawns, spawnFloor{name, median(floors[i]), median(floorFaults[i])})
	}
	rep.fault = median(faults)
	rep.decode, rep.valid = median(decodes), median(valids)
	rep.loadEnd = host.LoadAvg()
	if !o.markdown {
		rep.tables(out)
		return nil
	}
	if o.micro {
		progress("running the go test micro-benchmarks")
		if rep.micro, err = microBenchmarks(); err != nil {
			return err
		}
		progress("running the telemetry benchmark")
		if rep.telemetry, err = telemetryBenchmark(); err != nil {
			return err
		}
	}
	rep.loadEnd = host.LoadAvg()
	if o.keep != "" {
		b, err := os.ReadFile(o.keep)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		rep.kept = markedSections(string(b))
	}
	return rep.document(out)
}

// measure runs one peer through everything once. echo does what it can:
// cold starts, calls and payloads, each answered with itself; the
// lockstep relay only cold starts and calls.
func measure(p peer, ks kernels, ps payloads, o options) (sample, error) {
	s := sample{listFirst: map[int]time.Duration{}, payload: map[payloadKey]payloadStats{}, rssLoad: map[int]int64{}}
	cold, u, err := coldStart(p, ks.synth[catalogueSizes[0]], o.cold)
	if err != nil {
		return s, fmt.Errorf("cold start: %w", err)
	}
	s.cold, s.coldFault, s.coldRSS = cold, u.faults, u.rss
	syn := callTarget{socket: ks.synth[catalogueSizes[0]], tool: synth.FirstTool, args: `{"query":"relay"}`, want: synth.Answer}
	if p.echo {
		syn.want = ""
	}
	s.synth, s.rssCalls, err = calls(p, syn, o.load)
	if err != nil {
		return s, fmt.Errorf("calls through the synthetic kernel: %w", err)
	}
	if p.lockstep {
		return s, nil
	}
	for _, n := range payloadSizes {
		if err := payloadSession(p, ks.payload, ps, n, o.payloadReps, payloadKinds, &s); err != nil {
			return s, fmt.Errorf("payloads: %w", err)
		}
	}
	if p.echo {
		return s, nil
	}
	if s.coldRef, _, err = coldStart(p, ks.ref.socket, o.cold); err != nil {
		return s, fmt.Errorf("cold start, reference kernel: %w", err)
	}
	ref := callTarget{socket: ks.ref.socket, tool: "files.read", args: `{"path":"/` + noteName + `"}`, want: noteContent}
	var rss int64
	s.ref, rss, err = calls(p, ref, o.load)
	if err != nil {
		return s, fmt.Errorf("calls through the reference kernel: %w", err)
	}
	s.rssCalls = max(s.rssCalls, rss)
	for _, n := range catalogueSizes {
		first, again, u, err := listTimes(p, ks.synth[n], n)
		if err != nil {
			return s, fmt.Errorf("tools/list of %d: %w", n, err)
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

// kernelConfig grants every integration all the file tools over the
// root: reads for the calls, and writes so that files.write is in the
// catalogue for the decode measurement (kernelDecode), whose calls are
// refused before anything is written.
const kernelConfig = `[files]
root = "root"

[[grant]]
subject = "integration:*"
resource = "files:/"
descendants = true
actions = ["read", "list", "search", "write"]
`

// startKernel runs the reference kernel over a root holding the note, with
// kernelConfig's grants, and waits until its socket accepts.
func startKernel(bin, work string) (*kernelProc, error) {
	root := filepath.Join(work, "root")
	if err := os.Mkdir(root, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(root, noteName), []byte(noteContent), 0o600); err != nil {
		return nil, err
	}
	config := filepath.Join(work, "kernel.toml")
	if err := os.WriteFile(config, []byte(kernelConfig), 0o600); err != nil {
		return nil, err
	}
	k := &kernelProc{socket: filepath.Join(work, "k.sock"), audit: filepath.Join(work, "audit.jsonl")}
	k.cmd = exec.Command(bin, "kernel", "--config", config, "--root", root, "--socket", k.socket, "--audit", k.audit, "--log-level", "error")
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

// microPackages hold the hot-path benchmarks: checking a long line's
// strings as it arrives, framing, projection and hashing, one relayed
// call, the first tools/list of 512 tools.
var microPackages = []string{"./internal/jsonlex", "./internal/jsonrpc", "./hashing", "./shim", "./bench/internal/synth"}

// telemetryCommand measures what the kernel's OpenTelemetry export adds
// to a call.
const telemetryCommand = "go test -run '^$' -bench CallWithTelemetry -benchmem -count 7 ./kernel"

// telemetryBenchmark runs telemetryCommand and returns its output.
func telemetryBenchmark() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args := strings.Fields(strings.ReplaceAll(telemetryCommand, "'^$'", "^$"))
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %w\n%s", telemetryCommand, err, out)
	}
	return string(out), nil
}

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
