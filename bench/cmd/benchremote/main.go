// Command benchremote measures what brokering a remote MCP server costs a
// call (issue 25): one tools/call from the Go SDK client through
// sharedos-mcp serve and the reference kernel to a Streamable HTTP MCP
// server on loopback, against the same client calling the same server
// directly (the floor), and, when -thv names ToolHive's thv, through
// `thv proxy` fronting the same server, all in one run, interleaved.
//
// Two servers are measured: the Go SDK's streamable server (this program,
// run again with -serve-go) and the npm reference server-everything in
// its streamableHttp mode (kernel/upstream/e2e/testdata/npm, installed by
// .ci/run; skipped, with a note, when it is not there).
//
// Run it from the module root:
//
//	go run ./bench/cmd/benchremote [-thv PATH] [-markdown | -update BENCHMARKS.md]
//
// -update replaces the section between beginMarker and endMarker in the
// file (appending it when there is none): make bench-relay rewrites the
// rest of BENCHMARKS.md and keeps that section as it is.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-mcp/bench/internal/host"
	"github.com/sharedos/sharedos-mcp/kernel/status"
)

type options struct {
	thv      string
	thvHome  string
	calls    int
	warm     int
	runs     int
	markdown bool
	update   string
	serveGo  string
}

// The lines around this program's section of BENCHMARKS.md.
const (
	beginMarker = "<!-- benchremote:begin -->"
	endMarker   = "<!-- benchremote:end -->"
)

func main() {
	var o options
	flag.StringVar(&o.thv, "thv", "", "ToolHive's thv `binary`, to measure thv proxy too (none: skipped)")
	flag.StringVar(&o.thvHome, "thv-home", "", "the `directory` thv runs with as HOME and XDG dirs (default: home beside the binary)")
	flag.IntVar(&o.calls, "calls", 500, "timed calls per peer and run")
	flag.IntVar(&o.warm, "warm", 50, "untimed calls per peer and run, first")
	flag.IntVar(&o.runs, "runs", 5, "runs; every figure is the median of them")
	flag.BoolVar(&o.markdown, "markdown", false, "print BENCHMARKS.md's section instead of a summary")
	flag.StringVar(&o.update, "update", "", "write BENCHMARKS.md's section into this `file`, in place of the one there")
	flag.StringVar(&o.serveGo, "serve-go", "", "internal: serve the Go SDK echo server on this `address`")
	flag.Parse()
	if o.serveGo != "" {
		serveGo(o.serveGo)
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "benchremote:", err)
		os.Exit(1)
	}
}

// serveGo is the Go SDK's Streamable HTTP server with one tool, echo
// {text}. It says "listening" on stdout once it accepts connections.
func serveGo(addr string) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench-go", Version: "1"}, nil)
	type args struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo the text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
		})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("listening")
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	fmt.Fprintln(os.Stderr, http.Serve(ln, h))
	os.Exit(1)
}

// server is one MCP server measured, and how its echo is called.
type server struct {
	name    string
	command func(port int) *exec.Cmd // runs it on a loopback port
	argName string                   // echo's argument
}

func url(port int) string { return fmt.Sprintf("http://127.0.0.1:%d/mcp", port) }

// peer is one way the client reaches the server.
type peer struct {
	name string
	tool string // the echo tool's name as this peer publishes it
	cs   *mcp.ClientSession
}

type result struct{ p50, p99 time.Duration }

func run(o options) error {
	work, err := os.MkdirTemp("", "benchremote")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "sharedos-mcp")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build sharedos-mcp: %v\n%s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var notes []string
	servers := []*server{{
		name:    "Go SDK streamable server",
		command: func(port int) *exec.Cmd { return exec.Command(self, "-serve-go", fmt.Sprintf("127.0.0.1:%d", port)) },
		argName: "text",
	}}
	everything := filepath.Join("kernel", "upstream", "e2e", "testdata", "npm", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(everything); err == nil {
		servers = append(servers, &server{
			name: "server-everything 2026.8.31 (Node)",
			command: func(port int) *exec.Cmd {
				cmd := exec.Command("node", everything, "streamableHttp")
				cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
				return cmd
			},
			argName: "message",
		})
	} else {
		notes = append(notes, "server-everything is not installed (npm ci --prefix kernel/upstream/e2e/testdata/npm): only the Go server was measured")
	}
	if o.thv == "" {
		notes = append(notes, "thv proxy was not measured: no -thv given")
	}
	type row struct {
		server string
		peers  []string
		res    map[string][]result
	}
	var rows []row
	load := host.LoadAvg()
	for _, s := range servers {
		r, err := measureServer(o, work, bin, s)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		rows = append(rows, row{server: s.name, peers: r.order, res: r.results})
	}
	loadEnd := host.LoadAvg()

	med := func(rs []result, f func(result) time.Duration) time.Duration {
		ds := make([]time.Duration, len(rs))
		for i, r := range rs {
			ds[i] = f(r)
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	p50 := func(r result) time.Duration { return r.p50 }
	p99 := func(r result) time.Duration { return r.p99 }
	var w io.Writer = os.Stdout
	var section strings.Builder
	if o.update != "" {
		o.markdown, w = true, &section
	}
	if o.markdown {
		fmt.Fprintf(w, "%s\n\n## Remote upstreams: a brokered call over Streamable HTTP\n\n", beginMarker)
		fmt.Fprintf(w, "Generated by `make bench-remote THV=PATH/TO/thv` (`go run ./bench/cmd/benchremote -thv PATH/TO/thv -update BENCHMARKS.md`) on %s (%s, %s, load average at start %s, at end %s).\n\n",
			time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.Version(), cpus(), load, loadEnd)
		fmt.Fprintf(w, "One Go SDK client calls `echo` on a Streamable HTTP MCP server on loopback, %d calls one after another per peer and run (after %d untimed), %d runs with the peers in a rotated order; each figure is the median of the runs' percentiles. "+
			"**direct** is the client calling the server itself (the floor); **serve + kernel** is the client spawning `sharedos-mcp serve`, which relays to the reference kernel, which authorizes the call on its grant, records it in the audit log and forwards it over its remote transport (the kernel holds the session to the server); **thv proxy** is ToolHive v0.47.0's transparent proxy in front of the same server, which authorizes nothing.\n\n", o.calls, o.warm, o.runs)
		fmt.Fprintln(w, "| server | peer | p50 | p99 | added to a call, p50 | p50 ratio to direct | target |")
		fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---|")
		for _, r := range rows {
			floor := med(r.res["direct"], p50)
			for _, p := range r.peers {
				target := ""
				if p == "serve + kernel" {
					ratio := float64(med(r.res[p], p50)) / float64(floor)
					target = "≤ 1.3×: " + map[bool]string{true: "met", false: "**not met**"}[ratio <= 1.3]
				}
				added := "–"
				if p != "direct" {
					added = us(med(r.res[p], p50) - floor)
				}
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.2f× | %s |\n", r.server, p, us(med(r.res[p], p50)), us(med(r.res[p], p99)), added, float64(med(r.res[p], p50))/float64(floor), target)
			}
		}
		fmt.Fprintf(w, "\nA brokered call crosses two more processes than a direct one (serve, then the kernel, each a socket or pipe hop each way) and the kernel's decision and audit line; thv proxy crosses one. On this machine, two cores shared with other builds, each hop costs scheduling latency that the load makes large, so the added latency is the steadier figure; the ratio to a fast server is the hard case for the target, the ratio to a Node server the common one.\n")
		for _, n := range notes {
			fmt.Fprintf(w, "\nNote: %s.\n", n)
		}
		fmt.Fprintf(w, "\n%s\n", endMarker)
		if o.update != "" {
			return updateSection(o.update, section.String())
		}
		return nil
	}
	for _, r := range rows {
		floor := med(r.res["direct"], p50)
		for _, p := range r.peers {
			fmt.Fprintf(w, "%-36s %-16s p50 %9s  p99 %9s  %.2f× direct\n", r.server, p, us(med(r.res[p], p50)), us(med(r.res[p], p99)), float64(med(r.res[p], p50))/float64(floor))
		}
	}
	for _, n := range notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}

type measured struct {
	order   []string
	results map[string][]result
}

// measureServer starts s, the kernel brokering it and thv in front of it,
// connects a client each way, and times the calls.
func measureServer(o options, work, bin string, s *server) (*measured, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	srv := s.command(port)
	if err := startAndWait(srv, "listening"); err != nil {
		return nil, fmt.Errorf("start the server: %w", err)
	}
	defer stop(srv)

	dir, err := os.MkdirTemp(work, "k")
	if err != nil {
		return nil, err
	}
	state := filepath.Join(dir, "state")
	config := filepath.Join(dir, "kernel.toml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`state_dir = %q
[[upstream]]
name = "remote"
url = %q
[[upstream.tool]]
name = "echo"
action = "read"
resource = "/echo"
[[grant]]
subject = "integration:bench"
resource = "remote:/echo"
actions = ["read"]
`, state, url(port))), 0o600); err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "k.sock")
	kernel := exec.Command(bin, "kernel", "--config", config, "--socket", sock, "--audit", filepath.Join(dir, "audit.jsonl"), "--log-level", "error")
	kernel.Env = isolated(dir)
	if err := startAndWait(kernel, "kernel listening on"); err != nil {
		return nil, fmt.Errorf("start the kernel: %w", err)
	}
	defer stop(kernel)
	if err := waitReady(state, "remote"); err != nil {
		return nil, err
	}

	ctx := context.Background()
	args := map[string]any{s.argName: "hello"}
	connect := func(name, tool string, t mcp.Transport) (*peer, error) {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "benchremote", Version: "1"}, nil).Connect(ctx, t, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: connect: %w", name, err)
		}
		return &peer{name: name, tool: tool, cs: cs}, nil
	}
	var peers []*peer
	p, err := connect("direct", "echo", &mcp.StreamableClientTransport{Endpoint: url(port)})
	if err != nil {
		return nil, err
	}
	peers = append(peers, p)
	serve := exec.Command(bin, "serve", "--integration", "bench", "--socket", sock)
	serve.Env = kernel.Env
	if p, err = connect("serve + kernel", "remote.echo", &mcp.CommandTransport{Command: serve}); err != nil {
		return nil, err
	}
	peers = append(peers, p)
	if o.thv != "" {
		thvPort, err := freePort()
		if err != nil {
			return nil, err
		}
		home := o.thvHome
		if home == "" {
			home = filepath.Join(filepath.Dir(o.thv), "home")
		}
		thv := exec.Command(o.thv, "proxy", "bench", "--target-uri", fmt.Sprintf("http://127.0.0.1:%d", port), "--port", fmt.Sprint(thvPort))
		thv.Env = append(os.Environ(), "TOOLHIVE_RUNTIME=kubernetes", "HOME="+home,
			"XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_DATA_HOME="+filepath.Join(home, ".local", "share"), "XDG_STATE_HOME="+filepath.Join(home, ".local", "state"))
		if err := startAndWait(thv, "Transparent proxy started"); err != nil {
			return nil, fmt.Errorf("start thv proxy: %w", err)
		}
		defer stop(thv)
		if p, err = connect("thv proxy", "echo", &mcp.StreamableClientTransport{Endpoint: url(thvPort)}); err != nil {
			return nil, err
		}
		peers = append(peers, p)
	}
	defer func() {
		for _, p := range peers {
			p.cs.Close()
		}
	}()

	m := &measured{results: map[string][]result{}}
	for _, p := range peers {
		m.order = append(m.order, p.name)
	}
	for r := range o.runs {
		for i := range peers {
			p := peers[(i+r)%len(peers)]
			res, err := timeCalls(ctx, p, args, o.warm, o.calls)
			if err != nil {
				return nil, err
			}
			m.results[p.name] = append(m.results[p.name], res)
		}
	}
	return m, nil
}

// timeCalls calls the peer's echo warm times, then calls times one after
// another, each timed, and returns the percentiles.
func timeCalls(ctx context.Context, p *peer, args map[string]any, warm, calls int) (result, error) {
	params := &mcp.CallToolParams{Name: p.tool, Arguments: args}
	ds := make([]time.Duration, 0, calls)
	for i := range warm + calls {
		start := time.Now()
		r, err := p.cs.CallTool(ctx, params)
		d := time.Since(start)
		if err != nil {
			return result{}, fmt.Errorf("%s: %w", p.name, err)
		}
		if r.IsError {
			return result{}, fmt.Errorf("%s: the call failed: %v", p.name, r.Content)
		}
		if i >= warm {
			ds = append(ds, d)
		}
	}
	slices.Sort(ds)
	return result{p50: ds[len(ds)/2], p99: ds[len(ds)*99/100]}, nil
}

// startAndWait starts cmd and returns once a line of its stdout or stderr
// holds marker, within 60 s; the rest of its output is discarded.
func startAndWait(cmd *exec.Cmd, marker string) error {
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return err
	}
	found := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		var last []string
		for sc.Scan() {
			if strings.Contains(sc.Text(), marker) {
				found <- nil
				_, _ = io.Copy(io.Discard, r)
				return
			}
			last = append(last, sc.Text())
		}
		found <- fmt.Errorf("%s exited before saying %q: %s", cmd.Path, marker, strings.Join(last, "\n"))
	}()
	go func() {
		_ = cmd.Wait()
		w.Close()
	}()
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	select {
	case err := <-found:
		return err
	case <-t.C:
		stop(cmd)
		return fmt.Errorf("%s did not say %q within a minute", cmd.Path, marker)
	}
}

// updateSection puts section in file in place of the text from
// beginMarker to endMarker, or at its end when it has none.
func updateSection(file, section string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	text := string(b)
	if i := strings.Index(text, beginMarker); i >= 0 {
		if j := strings.Index(text[i:], endMarker); j >= 0 {
			text = text[:i] + strings.TrimSuffix(text[i+j+len(endMarker):], "\n")
		}
	}
	text = strings.TrimRight(text, "\n") + "\n\n" + section
	return os.WriteFile(file, []byte(text), 0o644)
}

// stop ends a process this program started, by its pid.
func stop(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

// waitReady polls the kernel's status file until upstream name is ready.
func waitReady(stateDir, name string) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if r, err := status.Read(stateDir); err == nil {
			for _, u := range r.Upstreams {
				if u.Name == name && u.State == "ready" {
					return nil
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("the kernel's upstream did not become ready within a minute")
}

// isolated is the environment with a home and XDG directories under dir.
func isolated(dir string) []string {
	env := []string{"HOME=" + dir}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "HOME" && !strings.HasPrefix(k, "XDG_") && k != "SHAREDOS_SOCKET" {
			env = append(env, kv)
		}
	}
	return env
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1e3) }

func cpus() string { return fmt.Sprintf("%d CPUs", runtime.NumCPU()) }
