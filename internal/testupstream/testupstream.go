// Package testupstream is a small MCP stdio server, written with the Go
// SDK, that the upstream, kernel and command tests and the conformance
// runner broker. A program becomes it when started with Arg as its first
// argument (see MaybeRun): the tests run their own binary as the
// upstream, so the core of the suite needs nothing but Go.
//
// Its tools, each behaving as its name says:
//
//	echo {text}        returns text, also as structuredContent {text}
//	env                returns the server's environment, one variable a line
//	slow {id}          answers only when cancelled; then prints "cancelled ID" on stderr
//	hold {id}          answers once release {id} is called, reporting progress first;
//	                   when cancelled, prints "cancelled ID" on stderr
//	release {id}       lets hold {id} answer
//	crash              exits with status 3 in the middle of the call
//	garbage            writes a line that is not JSON-RPC to stdout, then waits
//	spawn {how}        starts a grandchild that ignores SIGTERM; returns its pid.
//	                   how "" keeps it in the server's process group; "setsid",
//	                   "setpgid" and "double" (a double fork: a child that starts
//	                   it in a session of its own and exits) take it out of the
//	                   group, and give it the server's stdout to hold
//	fail               answers isError with text "it went wrong"
//	rpcerror           answers a JSON-RPC error
//	huge {bytes}       returns a text of that many bytes
//	stderr {lines, width}  prints lines of that width on stderr
//	change             changes echo's description and adds a tool "added" (a list change)
//	get_repo {owner, repo}  returns "owner/repo"; owner is a string, repo too
//	get_issue {n}      n is an integer
//	get_user {user}    returns "data of USER", reading its arguments as a Go
//	                   server does: encoding/json into a struct, which matches
//	                   names case-insensitively and keeps the last of two
//	read_text {path}   returns the text of the file at path on this host
//	write_text {path, text}  writes text to the file at path on this host,
//	                   replacing it; returns the number of bytes written
//	purge              returns "purged": a tool whose name says it acts, for
//	                   a config to classify one way and a reload another
//
// Flags: -record FILE appends one JSON line {"tool", "arguments"} to FILE
// for every call, before running it, so a test can tell which calls
// reached the upstream; -variant N gives echo a description of its own per variant;
// -stubborn ignores SIGTERM and stays after stdin ends;
// -bad adds tools that cannot be published ("has space", a bad name, and
// "undescribed", without a description).
package testupstream

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Arg is the first argument that makes a test binary this server.
const Arg = "__upstream-test-server"

// sleeperArg makes a test binary the grandchild spawn starts.
const sleeperArg = "__upstream-test-sleeper"

// forkerArg makes a test binary the middle of spawn's double fork: it
// starts the sleeper in a session of its own, writes its pid on fd 3 and
// exits.
const forkerArg = "__upstream-test-forker"

// MaybeRun runs the server, or the grandchild, and exits if the process
// was started as one; otherwise it returns at once. Call it in TestMain.
func MaybeRun() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case Arg:
		os.Exit(run(os.Args[2:]))
	case sleeperArg:
		signal.Ignore(syscall.SIGTERM)
		select {}
	case forkerArg:
		exe, err := os.Executable()
		if err != nil {
			os.Exit(1)
		}
		c := exec.Command(exe, sleeperArg)
		c.Stdout = os.Stdout
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			os.Exit(1)
		}
		fmt.Fprintln(os.NewFile(3, "pid"), c.Process.Pid)
		os.Exit(0)
	}
}

// Main runs the server with flags, for a program that is it by name
// rather than by Arg; it returns the exit code.
func Main(flags []string) int { return run(flags) }

// Command is the command line that runs the server from the test binary
// exe, with flags.
func Command(exe string, flags ...string) []string {
	return append([]string{exe, Arg}, flags...)
}

// EchoDescription is echo's description in a variant.
func EchoDescription(variant int) string {
	if variant == 0 {
		return "Echo the text back."
	}
	return fmt.Sprintf("Echo the text back (variant %d).", variant)
}

func run(args []string) int {
	fs := flag.NewFlagSet("testserver", flag.ContinueOnError)
	variant := fs.Int("variant", 0, "which echo description to offer")
	bad := fs.Bool("bad", false, "also offer tools that cannot be published")
	stubborn := fs.Bool("stubborn", false, "ignore SIGTERM and stay after stdin ends")
	record := fs.String("record", "", "append every call to this `file`")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *stubborn {
		signal.Ignore(syscall.SIGTERM)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "testserver", Version: "1.0.0"}, nil)
	h := &handlers{srv: srv, held: map[string]chan struct{}{}}
	if *record != "" {
		f, err := os.OpenFile(*record, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testserver:", err)
			return 1
		}
		defer f.Close()
		srv.AddReceivingMiddleware(recordCalls(f))
	}
	h.add(*variant, *bad)
	fmt.Fprintln(os.Stderr, "testserver ready")
	err := srv.Run(context.Background(), &mcp.StdioTransport{})
	if *stubborn {
		select {}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
		return 1
	}
	return 0
}

type handlers struct {
	srv  *mcp.Server
	mu   sync.Mutex
	held map[string]chan struct{}
}

func schema(props map[string]string, required ...string) json.RawMessage {
	p := map[string]any{}
	for k, t := range props {
		p[k] = map[string]any{"type": t}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": p, "required": required})
	return b
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func args(req *mcp.CallToolRequest) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(req.Params.Arguments, &m)
	return m
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

func num(m map[string]any, k string) int { f, _ := m[k].(float64); return int(f) }

func (h *handlers) add(variant int, bad bool) {
	s := h.srv
	s.AddTool(&mcp.Tool{
		Name: "echo", Description: EchoDescription(variant),
		InputSchema:  schema(map[string]string{"text": "string"}, "text"),
		OutputSchema: schema(map[string]string{"text": "string"}, "text"),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		t := str(args(req), "text")
		r := text(t)
		r.StructuredContent = map[string]any{"text": t}
		return r, nil
	})
	s.AddTool(&mcp.Tool{Name: "env", Description: "Return the environment.", InputSchema: schema(nil)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			env := os.Environ()
			sort.Strings(env)
			return text(strings.Join(env, "\n")), nil
		})
	s.AddTool(&mcp.Tool{Name: "slow", Description: "Answer only when cancelled.", InputSchema: schema(map[string]string{"id": "string"})},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			fmt.Fprintln(os.Stderr, "cancelled", str(args(req), "id"))
			return text("cancelled"), nil
		})
	s.AddTool(&mcp.Tool{Name: "hold", Description: "Report progress, then answer once released.", InputSchema: schema(map[string]string{"id": "string"})},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			id := str(args(req), "id")
			ch := h.gate(id)
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= 3; i++ {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)})
				}
			}
			select {
			case <-ch:
				return text("released " + id), nil
			case <-ctx.Done():
				fmt.Fprintln(os.Stderr, "cancelled", id)
				return nil, ctx.Err()
			}
		})
	s.AddTool(&mcp.Tool{Name: "release", Description: "Let hold answer.", InputSchema: schema(map[string]string{"id": "string"})},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			close(h.gate(str(args(req), "id")))
			return text("ok"), nil
		})
	s.AddTool(&mcp.Tool{Name: "crash", Description: "Exit in the middle of the call.", InputSchema: schema(nil)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			fmt.Fprintln(os.Stderr, "crashing")
			os.Exit(3)
			return nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "garbage", Description: "Write a line that is not JSON-RPC.", InputSchema: schema(nil)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Stdout.WriteString("this is not JSON\n")
			<-ctx.Done()
			return nil, ctx.Err()
		})
	s.AddTool(&mcp.Tool{Name: "spawn", Description: "Start a grandchild that ignores SIGTERM.", InputSchema: schema(map[string]string{"how": "string"})},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			pid, err := spawn(str(args(req), "how"))
			if err != nil {
				return nil, err
			}
			return text(strconv.Itoa(pid)), nil
		})
	s.AddTool(&mcp.Tool{Name: "fail", Description: "Answer isError.", InputSchema: schema(nil)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			r := text("it went wrong")
			r.IsError = true
			return r, nil
		})
	s.AddTool(&mcp.Tool{Name: "rpcerror", Description: "Answer a JSON-RPC error.", InputSchema: schema(nil)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("no such thing")
		})
	s.AddTool(&mcp.Tool{Name: "huge", Description: "Return a text of the given size.", InputSchema: schema(map[string]string{"bytes": "integer"})},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(strings.Repeat("x", num(args(req), "bytes"))), nil
		})
	s.AddTool(&mcp.Tool{Name: "stderr", Description: "Print lines on stderr.", InputSchema: schema(map[string]string{"lines": "integer", "width": "integer"})},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a := args(req)
			line := strings.Repeat("e", num(a, "width"))
			for i := 0; i < num(a, "lines"); i++ {
				fmt.Fprintln(os.Stderr, line)
			}
			fmt.Fprintln(os.Stderr, "stderr done")
			return text("printed"), nil
		})
	s.AddTool(&mcp.Tool{Name: "change", Description: "Change echo's description and add a tool.", InputSchema: schema(nil)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			h.add(variant+100, bad)
			s.AddTool(&mcp.Tool{Name: "added", Description: "Added by change.", InputSchema: schema(nil)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("added"), nil })
			return text("changed"), nil
		})
	s.AddTool(&mcp.Tool{Name: "get_repo", Description: "Return owner/repo.", InputSchema: schema(map[string]string{"owner": "string", "repo": "string"}, "owner", "repo")},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a := args(req)
			return text(str(a, "owner") + "/" + str(a, "repo")), nil
		})
	s.AddTool(&mcp.Tool{Name: "get_issue", Description: "Return the issue number.", InputSchema: schema(map[string]string{"n": "integer"}, "n")},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(string(req.Params.Arguments)), nil
		})
	s.AddTool(&mcp.Tool{Name: "get_user", Description: "Return the user's data.", InputSchema: schema(map[string]string{"user": "string"}, "user")},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				User string `json:"user"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			return text("data of " + in.User), nil
		})
	s.AddTool(&mcp.Tool{Name: "read_text", Description: "Return the text of a file.", InputSchema: schema(map[string]string{"path": "string"}, "path")},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			b, err := os.ReadFile(str(args(req), "path"))
			if err != nil {
				r := text(err.Error())
				r.IsError = true
				return r, nil
			}
			return text(string(b)), nil
		})
	s.AddTool(&mcp.Tool{Name: "write_text", Description: "Write a text to a file.", InputSchema: schema(map[string]string{"path": "string", "text": "string"}, "path", "text")},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a := args(req)
			t := str(a, "text")
			if err := os.WriteFile(str(a, "path"), []byte(t), 0o600); err != nil {
				r := text(err.Error())
				r.IsError = true
				return r, nil
			}
			return text(fmt.Sprintf("wrote %d bytes", len(t))), nil
		})
	s.AddTool(&mcp.Tool{Name: "purge", Description: "Purge the graph.", InputSchema: schema(nil)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("purged"), nil })
	if bad {
		s.AddTool(&mcp.Tool{Name: "has space", Description: "A name that cannot be published.", InputSchema: schema(nil)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("no"), nil })
		s.AddTool(&mcp.Tool{Name: "undescribed", InputSchema: schema(nil)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("no"), nil })
	}
}

// spawn starts the sleeper as how says (see the spawn tool) and returns
// its pid.
func spawn(how string) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	if how == "double" {
		r, w, err := os.Pipe()
		if err != nil {
			return 0, err
		}
		defer r.Close()
		c := exec.Command(exe, forkerArg)
		c.Stdout = os.Stdout
		c.ExtraFiles = []*os.File{w}
		err = c.Start()
		w.Close()
		if err != nil {
			return 0, err
		}
		var pid int
		_, err = fmt.Fscan(r, &pid)
		if werr := c.Wait(); err == nil {
			err = werr
		}
		return pid, err
	}
	c := exec.Command(exe, sleeperArg)
	switch how {
	case "":
	case "setsid":
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	case "setpgid":
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	default:
		return 0, fmt.Errorf("spawn: how %q is not setsid, setpgid or double", how)
	}
	if how != "" {
		c.Stdout = os.Stdout
	}
	if err := c.Start(); err != nil {
		return 0, err
	}
	go func() { _ = c.Wait() }()
	return c.Process.Pid, nil
}

// Recorded is one line of a -record file.
type Recorded struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	// Meta is the trace context of the call's params._meta (traceparent,
	// tracestate), when it carried one: a kernel with telemetry sends it.
	Meta map[string]any `json:"meta,omitempty"`
}

// ReadRecord returns the calls recorded in file, in order; none when it
// does not exist.
func ReadRecord(file string) ([]Recorded, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Recorded
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var r Recorded
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("record %s: %w", file, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// recordCalls writes each tools/call to f before it runs.
func recordCalls(f *os.File) mcp.Middleware {
	var mu sync.Mutex
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" {
				r := Recorded{Tool: p.Name, Arguments: p.Arguments}
				for _, k := range []string{"traceparent", "tracestate"} {
					if v, ok := p.Meta[k]; ok {
						if r.Meta == nil {
							r.Meta = map[string]any{}
						}
						r.Meta[k] = v
					}
				}
				line, _ := json.Marshal(r)
				mu.Lock()
				_, _ = f.Write(append(line, '\n'))
				mu.Unlock()
			}
			return next(ctx, method, req)
		}
	}
}

// gate is the channel hold {id} waits on.
func (h *handlers) gate(id string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.held[id]
	if ch == nil {
		ch = make(chan struct{})
		h.held[id] = ch
	}
	return ch
}
