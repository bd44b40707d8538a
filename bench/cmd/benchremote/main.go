// Command benchremote measures what brokering a remote MCP server costs a
// call (issue 25): one tools/call from the Go SDK client through
// sharedos-mcp serve and the reference kernel to a Streamable HTTP MCP
// server on loopback, against the same client calling the same server
// directly (the floor), and, when -thv names ToolHive's thv, through
// `thv proxy` fronting the same server, all in one run, interleaved. Four
// more clients take the brokered call apart: three speak the kernel's
// socket protocol themselves (a read, a call with an effect, a ping), one
// speaks MCP to serve's stdio without an MCP client.
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
	"bytes"
	"context"
	"encoding/json"
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

// peer is one way the client reaches the server: call makes one call of
// its echo, close ends the session.
type peer struct {
	name  string
	call  func(ctx context.Context) error
	close func()
}

// The peers, by name, in the order they are listed.
const (
	peerDirect   = "direct"
	peerServe    = "serve + kernel"
	peerThv      = "thv proxy"
	peerSocket   = "kernel socket"
	peerEffect   = "kernel socket, write"
	peerPing     = "kernel socket, ping"
	peerRawServe = "serve + kernel, no MCP client"
)

// mcpPeer calls tool with args on an MCP client session.
func mcpPeer(name string, cs *mcp.ClientSession, tool string, args map[string]any) *peer {
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	return &peer{name: name, close: func() { cs.Close() }, call: func(ctx context.Context) error {
		r, err := cs.CallTool(ctx, params)
		if err != nil {
			return err
		}
		if r.IsError {
			return fmt.Errorf("the call failed: %v", r.Content)
		}
		return nil
	}}
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
			floor := med(r.res[peerDirect], p50)
			for _, p := range r.peers {
				if !slices.Contains([]string{peerDirect, peerServe, peerThv}, p) {
					continue
				}
				target := ""
				if p == peerServe {
					ratio := float64(med(r.res[p], p50)) / float64(floor)
					target = "≤ 1.3×: " + map[bool]string{true: "met", false: "**not met**"}[ratio <= 1.3]
				}
				added := "–"
				if p != peerDirect {
					added = us(med(r.res[p], p50) - floor)
				}
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.2f× | %s |\n", r.server, p, us(med(r.res[p], p50)), us(med(r.res[p], p99)), added, float64(med(r.res[p], p50))/float64(floor), target)
			}
		}
		fmt.Fprintf(w, "\n### Where a brokered call's time goes\n\n"+
			"Four more clients, in the same rotation, take parts away. Three speak the kernel's socket protocol themselves, one request at a time, with no serve and no MCP client: **kernel socket** calls the same `echo` with `tools.invoke` (configured `read`); **kernel socket, write** calls it as a tool configured `write`; **kernel socket, ping** sends `ping`. **serve + kernel, no MCP client** spawns serve and writes MCP lines to its stdin itself. Each part is a difference of two p50s of the same run.\n\n")
		fmt.Fprintln(w, "| server | a round trip over the kernel's socket (ping) | the kernel brokering a read (kernel socket − direct) | serve relaying it (serve + kernel, no MCP client − kernel socket) | the client's MCP stack over stdio (serve + kernel − serve + kernel, no MCP client) | the decision of a call with an effect synced first (kernel socket, write − kernel socket) |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
		for _, r := range rows {
			p := func(name string) time.Duration { return med(r.res[name], p50) }
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.server, us(p(peerPing)), us(p(peerSocket)-p(peerDirect)),
				us(p(peerRawServe)-p(peerSocket)), us(p(peerServe)-p(peerRawServe)), us(p(peerEffect)-p(peerSocket)))
		}
		fmt.Fprint(w, remoteNotes)
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
		floor := med(r.res[peerDirect], p50)
		for _, p := range r.peers {
			fmt.Fprintf(w, "%-36s %-22s p50 %9s  p99 %9s  %.2f× direct\n", r.server, p, us(med(r.res[p], p50)), us(med(r.res[p], p99)), float64(med(r.res[p], p50))/float64(floor))
		}
	}
	for _, n := range notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}

// remoteNotes is what the section says about its figures that one run
// cannot measure.
const remoteNotes = `
The last column is the price of a guarantee: the decision of a call whose tool may change something is on disk (an fsync of the audit log) before the server is called, so that no effect happens unrecorded. A read pays one write(2) of its audit line and no sync. The rest is the price of where things run, not of a check:

- **The kernel is a process of its own,** because it holds what the harness and the model must not reach (the grants, the audit log, the upstream's credentials and its session): one more hop each way (the ping) and one more process to wake, dear on this machine, whose two cores are shared with other builds. Its own work on a read (the envelope and the arguments read once, the grant, one audit line, the answer) is about a seventh of its CPU time under a loop of these calls; most of the rest is the Go SDK's client and the garbage collection its allocations cause, which also accounts for about half of the time the kernel's goroutines wait to run (` + "`go tool trace -pprof=sched`" + `). In go-sdk v1.8.0 every decode goes through ` + "`internal/json.Unmarshal`" + `, which makes a segmentio Decoder and with it a 32 KiB buffer for each message (about 190 KB of garbage per call in the kernel), and its HTTP client decodes each request's params once more to find their protocol version (` + "`streamableClientConn.setMCPHeaders`" + ` → ` + "`protocolVersionFromMessage`" + `).
- **serve is a process of its own,** because the harness spawns one per turn over stdio; it relays each line to the kernel and back.
- **The harness's MCP client** speaks stdio to serve where a direct client speaks HTTP to the server; the Go SDK's stdio client first tries every line it reads as a batch (` + "`readBatch`" + ` in transport.go), one more decode per message. A harness pays this in whatever client it has.
`

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
	// echo, granted to the bench integration, as upstream name's tool
	// with that action.
	echo := func(name, action string) string {
		return fmt.Sprintf("[[upstream]]\nname = %q\nurl = %q\n[[upstream.tool]]\nname = \"echo\"\naction = %q\nresource = \"/echo\"\n"+
			"[[grant]]\nsubject = \"integration:bench\"\nresource = \"%s:/echo\"\nactions = [%q]\n", name, url(port), action, name, action)
	}
	// remotew is the same server's echo as a tool with an effect: its
	// decision is synced to disk before the server is called.
	toml := fmt.Sprintf("state_dir = %q\n", state) + echo("remote", "read") + echo("remotew", "write")
	if err := os.WriteFile(config, []byte(toml), 0o600); err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "k.sock")
	kernel := exec.Command(bin, "kernel", "--config", config, "--socket", sock, "--audit", filepath.Join(dir, "audit.jsonl"), "--log-level", "error")
	kernel.Env = isolated(dir)
	if err := startAndWait(kernel, "kernel listening on"); err != nil {
		return nil, fmt.Errorf("start the kernel: %w", err)
	}
	defer stop(kernel)
	if err := waitReady(state, "remote", "remotew"); err != nil {
		return nil, err
	}

	ctx := context.Background()
	args := map[string]any{s.argName: "hello"}
	var peers []*peer
	defer func() {
		for _, p := range peers {
			p.close()
		}
	}()
	connect := func(name, tool string, t mcp.Transport) error {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "benchremote", Version: "1"}, nil).Connect(ctx, t, nil)
		if err != nil {
			return fmt.Errorf("%s: connect: %w", name, err)
		}
		peers = append(peers, mcpPeer(name, cs, tool, args))
		return nil
	}
	if err := connect(peerDirect, "echo", &mcp.StreamableClientTransport{Endpoint: url(port)}); err != nil {
		return nil, err
	}
	for _, sp := range []struct{ name, tool string }{{peerSocket, "remote.echo"}, {peerEffect, "remotew.echo"}, {peerPing, ""}} {
		p, err := socketPeer(sp.name, sock, sp.tool, s.argName)
		if err != nil {
			return nil, err
		}
		peers = append(peers, p)
	}
	serve := exec.Command(bin, "serve", "--integration", "bench", "--socket", sock)
	serve.Env = kernel.Env
	if err := connect(peerServe, "remote.echo", &mcp.CommandTransport{Command: serve}); err != nil {
		return nil, err
	}
	raw, err := rawServePeer(bin, kernel.Env, sock, s.argName)
	if err != nil {
		return nil, err
	}
	peers = append(peers, raw)
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
		if err := connect(peerThv, "echo", &mcp.StreamableClientTransport{Endpoint: url(thvPort)}); err != nil {
			return nil, err
		}
	}

	m := &measured{results: map[string][]result{}}
	for _, p := range peers {
		m.order = append(m.order, p.name)
	}
	for r := range o.runs {
		for i := range peers {
			p := peers[(i+r)%len(peers)]
			res, err := timeCalls(ctx, p, o.warm, o.calls)
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
func timeCalls(ctx context.Context, p *peer, warm, calls int) (result, error) {
	ds := make([]time.Duration, 0, calls)
	for i := range warm + calls {
		start := time.Now()
		err := p.call(ctx)
		d := time.Since(start)
		if err != nil {
			return result{}, fmt.Errorf("%s: %w", p.name, err)
		}
		if i >= warm {
			ds = append(ds, d)
		}
	}
	slices.Sort(ds)
	return result{p50: ds[len(ds)/2], p99: ds[len(ds)*99/100]}, nil
}

// socketPeer is a client of the kernel's socket itself, on a connection
// of its own, one request at a time, without serve and without an MCP
// client: it calls tool with tools.invoke or, with no tool, sends ping (a
// round trip over the socket and the kernel's read loop, and nothing
// else).
func socketPeer(name, sock, tool, argName string) (*peer, error) {
	k, err := dialKernel(sock)
	if err != nil {
		return nil, err
	}
	if tool == "" {
		return &peer{name: name, close: k.close, call: func(context.Context) error {
			_, err := k.roundTrip(`{"jsonrpc":"2.0","id":2,"method":"ping","params":{}}`)
			return err
		}}, nil
	}
	var list struct {
		Result struct {
			CatalogHash string `json:"catalogHash"`
		} `json:"result"`
	}
	line, err := k.roundTrip(`{"jsonrpc":"2.0","id":2,"method":"tools.list","params":{}}`)
	if err == nil {
		err = json.Unmarshal(line, &list)
	}
	if err != nil || list.Result.CatalogHash == "" {
		k.close()
		return nil, fmt.Errorf("%s: tools.list: %v: %s", name, err, line)
	}
	n := 0
	return &peer{name: name, close: k.close, call: func(context.Context) error {
		n++
		line, err := k.roundTrip(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools.invoke","params":{"callId":"c%d","tool":%q,"arguments":{%q:"hello"},"catalogHash":%q}}`,
			n+2, n, tool, argName, list.Result.CatalogHash))
		if err == nil && !bytes.Contains(line, []byte(`"status":"succeeded"`)) {
			err = fmt.Errorf("the call failed: %s", line)
		}
		return err
	}}, nil
}

// lineConn is one side of a line-delimited JSON-RPC conversation, one
// request at a time.
type lineConn struct {
	w     io.Writer
	r     *bufio.Reader
	close func()
}

func dialKernel(sock string) (*lineConn, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("kernel socket: %w", err)
	}
	k := &lineConn{w: c, r: bufio.NewReaderSize(c, 64<<10), close: func() { c.Close() }}
	if _, err := k.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"integration.hello","params":{"name":"bench","shim":{"name":"benchremote","version":"1"}}}`); err != nil {
		c.Close()
		return nil, fmt.Errorf("kernel socket: hello: %w", err)
	}
	return k, nil
}

// rawServePeer spawns serve and speaks MCP on its stdio itself, one line
// at a time, instead of through an MCP client: serve's relaying alone.
func rawServePeer(bin string, env []string, sock, argName string) (*peer, error) {
	cmd := exec.Command(bin, "serve", "--integration", "bench", "--socket", sock)
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &lineConn{w: stdin, r: bufio.NewReaderSize(stdout, 64<<10), close: func() {
		stdin.Close()
		_ = cmd.Wait()
	}}
	if _, err := s.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"benchremote","version":"1"}}}`); err != nil {
		stop(cmd)
		s.close()
		return nil, fmt.Errorf("%s: initialize: %w", peerRawServe, err)
	}
	if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		stop(cmd)
		s.close()
		return nil, err
	}
	n := 1
	return &peer{name: peerRawServe, close: s.close, call: func(context.Context) error {
		n++
		line, err := s.roundTrip(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"remote.echo","arguments":{%q:"hello"}}}`, n, argName))
		if err == nil && bytes.Contains(line, []byte(`"isError":true`)) {
			err = fmt.Errorf("the call failed: %s", line)
		}
		return err
	}}, nil
}

// roundTrip writes one request line and reads the answer line, which it
// refuses when it is an error.
func (k *lineConn) roundTrip(request string) ([]byte, error) {
	if _, err := io.WriteString(k.w, request+"\n"); err != nil {
		return nil, err
	}
	line, err := k.r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(line, []byte(`"result":`)) {
		return nil, fmt.Errorf("%s", bytes.TrimSpace(line))
	}
	return line, nil
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

// waitReady polls the kernel's status file until every upstream named is
// ready.
func waitReady(stateDir string, names ...string) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if r, err := status.Read(stateDir); err == nil {
			ready := 0
			for _, u := range r.Upstreams {
				if slices.Contains(names, u.Name) && u.State == "ready" {
					ready++
				}
			}
			if ready == len(names) {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("the kernel's upstreams did not become ready within a minute")
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
