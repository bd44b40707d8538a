// Command minrelay is the benchmarks' minimal relay: the simplest correct
// MCP stdio relay to a kernel socket that fits on a page of Go, written
// the usual way, with encoding/json and buffered I/O. It says hello, turns
// each tools/call into a tools.invoke and each answer back into a tool
// result, and for tools/list fetches the catalogue, takes its SHA-256 and
// forwards it. Answers that involve the kernel go out in arrival order (a
// FIFO of ids); calls are pipelined to the kernel. It does nothing else:
// no projection, no peer check, no cancellation, no timeouts. benchrelay
// measures serve against it as "what anyone could do".
//
// Usage: minrelay -socket PATH
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Name            string          `json:"name"`
		Arguments       json.RawMessage `json:"arguments"`
	} `json:"params"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type kernelRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// answer is any of the kernel's answers: hello, tools.list, tools.invoke.
type answer struct {
	ID     int64 `json:"id"`
	Result struct {
		kproto.InvokeResult
		Tools       json.RawMessage `json:"tools"`
		CatalogHash string          `json:"catalogHash"`
	} `json:"result"`
	Error *rpcError `json:"error"`
}

type callResult struct {
	Content any  `json:"content"`
	IsError bool `json:"isError,omitempty"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func text(s string) []textBlock { return []textBlock{{"text", s}} }

type listResult struct {
	Tools json.RawMessage   `json:"tools"`
	Meta  map[string]string `json:"_meta"`
}

// pending is a request sent to the kernel and not yet answered. id is the
// MCP request's; nil for the catalogue fetched before a turn's first call.
type pending struct {
	id   json.RawMessage
	kid  int64
	list bool
}

type relay struct {
	kr   *bufio.Reader
	kw   *bufio.Writer // owned by the stdin loop
	mu   sync.Mutex    // guards out
	out  *bufio.Writer
	fifo chan pending
	hash chan string // the catalogHash, from the answer side to the stdin loop
	kid  int64
}

func main() {
	socket := flag.String("socket", "", "kernel socket `path`")
	flag.Parse()
	conn, err := net.Dial("unix", *socket)
	if err != nil {
		fail(err)
	}
	r := &relay{kr: bufio.NewReaderSize(conn, 64<<10), kw: bufio.NewWriterSize(conn, 64<<10),
		out: bufio.NewWriterSize(os.Stdout, 64<<10), fifo: make(chan pending, 4096), hash: make(chan string, 1)}
	r.write(0, kproto.MethodHello, kproto.HelloParams{Name: "bench", Shim: kproto.Peer{Name: "minrelay", Version: "0"}})
	r.kw.Flush()
	if a := r.kernelAnswer(); a.Error != nil {
		fail(fmt.Errorf("hello refused: %s", a.Error.Message))
	}
	done := make(chan struct{})
	go func() { r.answers(); close(done) }()
	r.requests()
	close(r.fifo)
	<-done
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "minrelay:", err)
	os.Exit(1)
}

// requests reads stdin until EOF, answering what needs no kernel at once.
func (r *relay) requests() {
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	catalogHash := ""
	for {
		line, err := in.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			break
		}
		var req request
		switch {
		case json.Unmarshal(line, &req) != nil:
			r.reply(response{Error: &rpcError{-32700, "parse error"}}, true)
		case req.ID == nil: // a notification: nothing to answer
		case req.Method == "initialize":
			r.reply(response{ID: req.ID, Result: map[string]any{"protocolVersion": req.Params.ProtocolVersion,
				"capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": kproto.Peer{Name: "minrelay", Version: "0"}}}, true)
		case req.Method == "ping":
			r.reply(response{ID: req.ID, Result: struct{}{}}, true)
		case req.Method == "tools/list":
			r.send(pending{id: req.ID, list: true}, kproto.MethodList, struct{}{})
		case req.Method == "tools/call":
			if catalogHash == "" {
				r.send(pending{list: true}, kproto.MethodList, struct{}{})
				r.kw.Flush()
				catalogHash = <-r.hash
			}
			if len(req.Params.Arguments) == 0 {
				req.Params.Arguments = json.RawMessage("{}")
			}
			r.send(pending{id: req.ID}, kproto.MethodInvoke, kproto.InvokeParams{CallID: "c" + strconv.FormatInt(r.kid+1, 10),
				Tool: req.Params.Name, Arguments: req.Params.Arguments, CatalogHash: catalogHash})
		default:
			r.reply(response{ID: req.ID, Error: &rpcError{-32601, "method not found"}}, true)
		}
		if in.Buffered() == 0 {
			r.kw.Flush()
		}
	}
	r.kw.Flush()
}

// send writes a kernel request whose answer goes out behind those before.
func (r *relay) send(p pending, method string, params any) {
	r.kid++
	p.kid = r.kid
	r.fifo <- p
	r.write(p.kid, method, params)
}

func (r *relay) write(id int64, method string, params any) {
	b, _ := json.Marshal(kernelRequest{"2.0", id, method, params})
	r.kw.Write(append(b, '\n'))
}

func (r *relay) kernelAnswer() answer {
	line, err := r.kr.ReadBytes('\n')
	var a answer
	if err == nil {
		err = json.Unmarshal(line, &a)
	}
	if err != nil {
		fail(fmt.Errorf("kernel: %w", err))
	}
	return a
}

// answers writes the kernel's answers to stdout in the order of the FIFO,
// holding back any that arrive early.
func (r *relay) answers() {
	early := map[int64]answer{}
	for p := range r.fifo {
		a, ok := early[p.kid]
		for !ok {
			if a = r.kernelAnswer(); a.ID != p.kid {
				early[a.ID] = a
			} else {
				ok = true
			}
		}
		delete(early, p.kid)
		res := a.Result
		out := response{ID: p.id}
		switch {
		case p.list && p.id == nil:
			r.hash <- res.CatalogHash
			continue
		case a.Error != nil:
			out.Error = &rpcError{-32603, a.Error.Message}
		case p.list:
			sum := sha256.Sum256(res.Tools)
			out.Result = listResult{res.Tools, map[string]string{"sharedos/catalogHash": hex.EncodeToString(sum[:])}}
		case res.Status != kproto.StatusSucceeded:
			out.Result = callResult{text(res.Status + ": " + res.Code + ": " + res.Message), true}
		case len(res.Content) > 0:
			out.Result = callResult{Content: res.Content}
		default:
			out.Result = callResult{Content: text(string(res.Output))}
		}
		// Flush before this loop may wait: on the FIFO, or on the kernel
		// for an answer not yet read.
		r.reply(out, len(r.fifo) == 0 || r.kr.Buffered() == 0)
	}
	r.reply(response{}, true)
}

// reply writes one MCP answer (none when out is empty) and flushes.
func (r *relay) reply(out response, flush bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if out.Result != nil || out.Error != nil {
		out.JSONRPC = "2.0"
		b, _ := json.Marshal(out)
		r.out.Write(append(b, '\n'))
	}
	if flush {
		r.out.Flush()
	}
}
