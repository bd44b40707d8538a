package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// A scripted model plays one case: in round r (the number of tool-call
// rounds the harness has already answered) it asks for the calls of
// step r, and once every step has been answered it gives the final text.
// The round is read from the conversation the harness sends, not kept as
// server state, so a harness that retries a request or sends side
// requests (Claude Code asks for a session title) gets a consistent
// answer.

// finalAnswer is the text of every script's last turn; a harness that
// prints it reached the end of the turn.
const finalAnswer = "CONFORMANCE-FINAL-ANSWER"

// Call is one tool call the script asks for, by canonical MCP name.
type Call struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"args"`
}

// ToolResult is what a harness sent back to the model for one call.
type ToolResult struct {
	Round   int    `json:"round"` // the script round whose call it answers
	ID      string `json:"id,omitempty"`
	IsError bool   `json:"isError"`
	Text    string `json:"text"`
}

// exchange is one model request as the runner saw it.
type exchange struct {
	Round int      `json:"round"`
	Tools []string `json:"tools,omitempty"` // names the harness offered the model
	// Deferred are tools the harness named to the model without declaring
	// them: the model must load them through the harness's loader tool
	// (Claude Code's ToolSearch) before it can call them.
	Deferred []string     `json:"deferred,omitempty"`
	Results  []ToolResult `json:"results,omitempty"`
	Answer   string       `json:"answer"` // "tool_calls", "load" or "text"
	At       time.Time    `json:"at"`     // when the answer was written
}

// parsedRequest is what a vendor adapter extracts from one request.
type parsedRequest struct {
	tools    []string
	deferred []string     // named to the model but not declared (see exchange)
	rounds   int          // tool-call rounds already in the conversation
	results  []ToolResult // every tool result in the conversation
	stream   bool
}

// callID names a scripted call; the round is read back from the ids the
// harness echoes, because harnesses may merge or reorder history
// messages (Claude Code folds consecutive turns together).
func callID(round, i int) string { return fmt.Sprintf("call_%d_%d", round, i) }

// loadID names the call that loads round's deferred tools; it is not a
// callID, so it never counts as a round of the script.
func loadID(round int) string { return fmt.Sprintf("load_%d", round) }

// roundOf reads the round out of an id callID made, with whatever prefix
// a vendor adds ("toolu_").
func roundOf(id string) (int, bool) {
	i := strings.LastIndex(id, "call_")
	if i < 0 {
		return 0, false
	}
	var r, n int
	if _, err := fmt.Sscanf(id[i:], "call_%d_%d", &r, &n); err != nil {
		return 0, false
	}
	return r, true
}

// noteCall records that the conversation holds a call with id.
func (p *parsedRequest) noteCall(id string) {
	if r, ok := roundOf(id); ok && r+1 > p.rounds {
		p.rounds = r + 1
	}
}

// noteResult records a tool result for the call with id.
func (p *parsedRequest) noteResult(id string, isError bool, text string) {
	r, ok := roundOf(id)
	if !ok {
		r = -1
	}
	p.results = append(p.results, ToolResult{Round: r, ID: id, IsError: isError, Text: text})
}

// vendor speaks one model API.
type vendor interface {
	// parse reads a request body; ok is false for a request this API
	// does not answer (wrong path or method).
	parse(r *http.Request, body []byte) (parsedRequest, bool, error)
	// write answers with calls, or with text when calls is empty.
	write(w http.ResponseWriter, req parsedRequest, calls []exposedCall, text string)
}

// exposedCall is a scripted call under the name the harness exposes.
type exposedCall struct {
	id        string
	name      string // the function name as the harness offered it
	namespace string // Codex groups MCP tools under a namespace
	args      map[string]any
}

// modelServer is a scripted model on 127.0.0.1.
type modelServer struct {
	steps  [][]Call
	vendor vendor
	h      *harness
	srv    *http.Server
	ln     net.Listener
	// settle, when set, runs before the turn's final answer is written:
	// the cancellation case waits there for the harness's cancel to reach
	// the kernel, so that a cancel cannot be mistaken for the shim's own
	// clean-up after the turn.
	settle func()

	mu    sync.Mutex
	log   []exchange
	errs  []string
	asked map[int]int // requests seen per round
}

// maxAsks bounds the requests for one round: a harness that keeps asking
// without sending results back would otherwise loop until its timeout.
const maxAsks = 5

func startModel(steps [][]Call, h *harness, settle func()) (*modelServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("model server: %w", err)
	}
	m := &modelServer{steps: steps, vendor: h.vendor, h: h, ln: ln, settle: settle, asked: map[int]int{}}
	m.srv = &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	go m.srv.Serve(ln)
	return m, nil
}

func (m *modelServer) url() string { return "http://" + m.ln.Addr().String() }

func (m *modelServer) close() { m.srv.Close() }

func (m *modelServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, ok, err := m.vendor.parse(r, body)
	if !ok {
		// Telemetry, model listings and the like: not part of the turn.
		http.NotFound(w, r)
		return
	}
	if err != nil {
		m.fail("%s %s: %v", r.Method, r.URL.Path, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ex := exchange{Round: req.rounds, Tools: req.tools, Deferred: req.deferred, Results: req.results, Answer: "text"}
	var calls []exposedCall
	// A request that offers none of the kernel's tools is a side request
	// (a title, a summary): it gets text and does not advance the script.
	m.mu.Lock()
	m.asked[req.rounds]++
	looping := m.asked[req.rounds] > maxAsks
	m.mu.Unlock()
	if looping {
		m.fail("the harness asked for round %d more than %d times without answering its calls", req.rounds, maxAsks)
	}
	if req.rounds < len(m.steps) && m.h.offersKernel(slices.Concat(req.tools, req.deferred)) && !looping {
		step := m.steps[req.rounds]
		if names := m.h.needsLoad(step, req); names != nil {
			// The step's tools are named but not declared yet: the model
			// loads them first, as a real one must, and the round stays.
			ld := m.h.load(names)
			ld.id = loadID(req.rounds)
			calls, ex.Answer = []exposedCall{ld}, "load"
		} else {
			for i, c := range step {
				ec := m.h.expose(c, req.tools)
				ec.id = callID(req.rounds, i)
				calls = append(calls, ec)
			}
			ex.Answer = "tool_calls"
		}
	}
	if ex.Answer == "text" && req.rounds == len(m.steps) && m.settle != nil {
		m.settle()
	}
	ex.At = time.Now()
	m.mu.Lock()
	m.log = append(m.log, ex)
	m.mu.Unlock()
	m.vendor.write(w, req, calls, finalAnswer)
}

func (m *modelServer) fail(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errs = append(m.errs, fmt.Sprintf(format, args...))
}

func (m *modelServer) exchanges() ([]exchange, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]exchange(nil), m.log...), append([]string(nil), m.errs...)
}

// offersManaged reports whether any offered tool is one of the kernel's
// (its name ends in a form of files.* or sharedos.*).
func offersManaged(tools []string) bool {
	for _, t := range tools {
		if _, ok := managedSuffix(t); ok {
			return true
		}
	}
	return false
}

// managedSuffix finds the kernel tool an offered name stands for, in
// portable form: the harnesses prefix the server name, most replace "."
// with "_" (Gemini CLI keeps the dot), and DeepSeek Harness appends a
// hash to a name it changed.
func managedSuffix(offered string) (string, bool) {
	if strings.HasPrefix(offered, "mcp__sharedos__") {
		offered = dshHash.ReplaceAllString(offered, "")
	}
	for _, ns := range []string{"files", "sharedos"} {
		for _, sep := range []string{"_", "."} {
			i := strings.LastIndex(offered, ns+sep)
			if i >= 0 && (i == 0 || offered[i-1] == '_') {
				return portable(offered[i:]), true
			}
		}
	}
	return "", false
}

// portable is a canonical MCP name with "." replaced by "_", the form
// every harness here builds its exposed name from.
func portable(canonical string) string { return strings.ReplaceAll(canonical, ".", "_") }

// exposedAs returns the offered name that stands for canonical, or ok false
// when the harness does not offer it.
func exposedAs(canonical string, offered []string) (string, bool) {
	want := portable(canonical)
	for _, t := range offered {
		if s, ok := managedSuffix(t); ok && s == want {
			return t, true
		}
	}
	return "", false
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called on maps built from JSON-safe values
	}
	return b
}

// sse writes one server-sent event and flushes it.
func sse(w http.ResponseWriter, event string, data any) {
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", mustMarshal(data))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// textOf flattens a tool result's content as harnesses send it: a string,
// or an array of blocks with text fields, or any other JSON.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) == nil {
		var parts []string
		for _, b := range blocks {
			if b.Text != "" {
				parts = append(parts, b.Text)
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "\n")
		}
	}
	return string(raw)
}
