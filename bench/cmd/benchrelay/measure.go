package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"time"

	"github.com/sharedos/sharedos-mcp/bench/internal/synth"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
)

// peer is one way of serving the same kernel to an MCP client. command is
// nil for the direct client, which talks to the kernel socket itself.
type peer struct {
	key, label string
	command    func(socket string) *exec.Cmd
	size       int64 // bytes on disk to run it; 0 when not applicable
	echo       bool  // bench/cmd/echo: answers every line with itself
	// lockstep is bench/cmd/lockstep: a floor measured only for what it
	// bounds (cold start, calls one at a time), never compared as a relay.
	lockstep bool
}

// sample is what one run measured for one peer.
type sample struct {
	cold      time.Duration         // median of this run's cold starts, synthetic kernel
	coldRef   time.Duration         // the same against the reference kernel
	listFirst map[int]time.Duration // catalogue size → first tools/list
	listAgain time.Duration         // a second tools/list of the largest catalogue
	ref       callStats             // calls through the reference kernel
	synth     callStats             // calls through the synthetic kernel
	rssCalls  int64                 // peak RSS of the calls sessions, bytes
	rssList   int64                 // peak RSS of the largest catalogue's session, bytes
	coldFault int64                 // minor page faults of a session ended after initialize
	coldRSS   int64                 // peak RSS of such a session, bytes
	listFault int64                 // minor page faults of the largest catalogue's session
	payload   map[payloadKey]payloadStats
	rssLoad   map[int]int64 // payload size → peak RSS of the session relaying it
}

// payloadKind is which way a payload crosses the relay.
type payloadKind int

const (
	argument payloadKind = iota
	resultContent
	resultOutput
)

var payloadKinds = []payloadKind{argument, resultContent, resultOutput}

func (k payloadKind) String() string {
	return [...]string{"argument", "result as `content`", "result as `output`"}[k]
}

type payloadKey struct {
	kind payloadKind
	size int
}

// payloadStats is one payload call measured in one session.
type payloadStats struct {
	first time.Duration // the first call of its kind in the session
	warm  time.Duration // the median of the calls after it
}

// Request lines. The MCP client negotiates 2025-06-18, which every peer
// measured here speaks.
const (
	mcpInitialize  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"benchrelay","version":"0"}}}` + "\n"
	mcpInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
	kernelHello    = `{"jsonrpc":"2.0","id":1,"method":"integration.hello","params":{"name":"bench","shim":{"name":"benchrelay","version":"0"}}}` + "\n"
)

func mcpList(id int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/list","params":{}}` + "\n")
}

func kernelList(id int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools.list","params":{}}` + "\n")
}

// callStats is what one calls session measured.
type callStats struct {
	p50, p99 time.Duration // sequential tools/call round trips
	rate     float64       // pipelined calls per second
	inOrder  bool          // every pipelined answer came in request order
}

// callTarget is a kernel and the call made to it: tool, arguments (a JSON
// object) and a string every successful answer contains.
type callTarget struct {
	socket, tool, args, want string
}

// caller renders the id-th call of a session.
type caller func(id int) []byte

func mcpCall(t callTarget) caller {
	return func(id int) []byte {
		return []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"` + t.tool + `","arguments":` + t.args + `}}` + "\n")
	}
}

func kernelCall(t callTarget, hash string) caller {
	return func(id int) []byte {
		n := strconv.Itoa(id)
		return []byte(`{"jsonrpc":"2.0","id":` + n + `,"method":"tools.invoke","params":{"callId":"c` + n + `","tool":"` + t.tool + `","arguments":` + t.args + `,"catalogHash":"` + hash + `"}}` + "\n")
	}
}

// open starts a session with p against the kernel at socket and gets it
// ready for tools requests. For the direct client that is hello; for an
// MCP peer it is spawn, initialize and initialized. cold is the time until
// the first answer. echo answers initialize with itself, which the
// harness takes as an answer as well.
func open(p peer, socket string) (c *conn, cold time.Duration, done func() (usage, error), err error) {
	if p.command == nil {
		start := time.Now()
		c, nc, err := dialKernel(socket)
		if err != nil {
			return nil, 0, nil, err
		}
		if _, _, err := c.roundTrip(1, []byte(kernelHello)); err != nil {
			nc.Close()
			return nil, 0, nil, fmt.Errorf("hello: %w", err)
		}
		return c, time.Since(start), func() (usage, error) { return usage{}, nc.Close() }, nil
	}
	s, err := spawn(p.command(socket))
	if err != nil {
		return nil, 0, nil, err
	}
	if _, _, err := s.roundTrip(1, []byte(mcpInitialize)); err != nil {
		return nil, 0, nil, s.fail(fmt.Errorf("initialize: %w", err))
	}
	cold = time.Since(s.start)
	if !p.echo {
		if err := s.send([]byte(mcpInitialized)); err != nil {
			return nil, 0, nil, s.fail(err)
		}
	}
	return s.conn, cold, s.close, nil
}

// coldStart is spawn (or dial) to the first answer, n times; it returns
// the median time and the median usage of those sessions.
func coldStart(p peer, socket string, n int) (time.Duration, usage, error) {
	ds := make([]time.Duration, n)
	fs := make([]int64, n)
	rs := make([]int64, n)
	for i := range ds {
		_, d, done, err := open(p, socket)
		if err != nil {
			return 0, usage{}, err
		}
		u, err := done()
		if err != nil {
			return 0, usage{}, err
		}
		ds[i], fs[i], rs[i] = d, u.faults, u.rss
	}
	return median(ds), usage{rss: median(rs), faults: median(fs)}, nil
}

// listTimes opens a fresh session and times its first tools/list, which
// includes the fetch from the kernel, and a second one. It checks that
// want tools were listed.
func listTimes(p peer, socket string, want int) (first, again time.Duration, u usage, err error) {
	c, _, done, err := open(p, socket)
	if err != nil {
		return 0, 0, u, err
	}
	list := mcpList
	if p.command == nil {
		list = kernelList
	}
	a, first, err := c.roundTrip(2, list(2))
	if err == nil {
		err = checkToolCount(a.Result, want)
	}
	if err == nil {
		_, again, err = c.roundTrip(3, list(3))
	}
	u, cerr := done()
	if err == nil {
		err = cerr
	}
	return first, again, u, err
}

func checkToolCount(result json.RawMessage, want int) error {
	var r struct{ Tools []json.RawMessage }
	if err := json.Unmarshal(result, &r); err != nil {
		return fmt.Errorf("tools/list result: %w", err)
	}
	if len(r.Tools) != want {
		return fmt.Errorf("tools/list listed %d tools, want %d", len(r.Tools), want)
	}
	return nil
}

// catalogHash is what the direct client must send with every call, as a
// relay would: the kernel refuses a call without this turn's hash.
func catalogHash(c *conn) (string, error) {
	a, _, err := c.roundTrip(2, kernelList(2))
	if err != nil {
		return "", err
	}
	var r struct{ CatalogHash string }
	if err := json.Unmarshal(a.Result, &r); err != nil || r.CatalogHash == "" {
		return "", fmt.Errorf("tools.list gave no catalogHash: %v", err)
	}
	return r.CatalogHash, nil
}

// callLoad is the call part of a run's plan.
type callLoad struct{ warmup, sequential, pipelined int }

// calls measures sequential round trips and pipelined throughput in one
// session against t. Every answer must contain t.want (echo's answers are
// the requests: it is given an empty want).
func calls(p peer, t callTarget, load callLoad) (s callStats, rss int64, err error) {
	c, _, done, err := open(p, t.socket)
	if err != nil {
		return s, 0, err
	}
	defer func() {
		u, cerr := done()
		rss = u.rss
		if err == nil {
			err = cerr
		}
	}()
	call := mcpCall(t)
	if p.command == nil {
		hash, err := catalogHash(c)
		if err != nil {
			return s, 0, err
		}
		call = kernelCall(t, hash)
	}
	id := 10
	seq := make([]time.Duration, 0, load.sequential)
	for i := range load.warmup + load.sequential {
		id++
		a, d, err := c.roundTrip(id, call(id))
		if err != nil {
			return s, 0, err
		}
		if !bytes.Contains(a.Result, []byte(t.want)) || bytes.Contains(a.Result, []byte(`"isError":true`)) {
			return s, 0, fmt.Errorf("call %d did not succeed: %.300s", id, a.Result)
		}
		if i >= load.warmup {
			seq = append(seq, d)
		}
	}
	slices.Sort(seq)
	s.p50, s.p99 = seq[len(seq)/2], seq[len(seq)*99/100]
	s.rate, s.inOrder, err = pipeline(c, call, t.want, id+1, load.pipelined)
	return s, 0, err
}

// pipeline writes n calls without waiting for answers, from a second
// goroutine as a harness would, and reads the n answers. The rate is n
// over the time from the first write to the last answer.
func pipeline(c *conn, call caller, want string, firstID, n int) (rate float64, inOrder bool, err error) {
	start := time.Now()
	werr := make(chan error, 1)
	go func() {
		for i := range n {
			c.w.Write(call(firstID + i))
		}
		werr <- c.w.Flush()
	}()
	inOrder = true
	seen := make(map[int]bool, n)
	var last time.Time
	for i := range n {
		line, a, at, err := c.next()
		last = at
		if err != nil {
			return 0, false, fmt.Errorf("pipelined answer %d of %d: %w", i+1, n, err)
		}
		id, _ := strconv.Atoi(string(a.ID))
		if id != firstID+i {
			inOrder = false
		}
		if seen[id] || id < firstID || id >= firstID+n {
			return 0, false, fmt.Errorf("pipelined answer with unexpected id %s", a.ID)
		}
		seen[id] = true
		if !bytes.Contains(line, []byte(want)) {
			return 0, false, fmt.Errorf("pipelined call %d did not succeed: %.300s", id, line)
		}
	}
	elapsed := last.Sub(start)
	if err := <-werr; err != nil {
		return 0, false, err
	}
	return float64(n) / elapsed.Seconds(), inOrder, nil
}

// payloads holds the payload strings (synth.PayloadString) by size, built
// once per run of the harness.
type payloads map[int][]byte

func (ps payloads) get(n int) []byte {
	if _, ok := ps[n]; !ok {
		ps[n] = synth.PayloadString(n)
	}
	return ps[n]
}

// payloadCall renders the id-th call of kind k with a payload of n bytes,
// in pieces, so that a payload is written from the one copy the harness
// keeps. hash is "" for an MCP peer and the turn's catalogHash for the
// direct client.
func (ps payloads) call(k payloadKind, n int, hash string) func(id int) [][]byte {
	var args [][]byte
	switch k {
	case argument:
		args = [][]byte{[]byte(`{"text":`), ps.get(n), []byte(`}`)}
	case resultContent, resultOutput:
		shape := map[payloadKind]string{resultContent: synth.ShapeContent, resultOutput: synth.ShapeOutput}[k]
		args = [][]byte{[]byte(`{"result":"` + shape + `","bytes":` + strconv.Itoa(n) + `}`)}
	}
	return func(id int) [][]byte {
		n := strconv.Itoa(id)
		if hash == "" {
			head := `{"jsonrpc":"2.0","id":` + n + `,"method":"tools/call","params":{"name":"` + synth.PayloadTool + `","arguments":`
			return slices.Concat([][]byte{[]byte(head)}, args, [][]byte{[]byte("}}\n")})
		}
		head := `{"jsonrpc":"2.0","id":` + n + `,"method":"tools.invoke","params":{"callId":"c` + n + `","tool":"` + synth.PayloadTool + `","arguments":`
		return slices.Concat([][]byte{[]byte(head)}, args, [][]byte{[]byte(`,"catalogHash":"` + hash + `"}}` + "\n")})
	}
}

// payloadTrip writes one request in pieces and reads its answer, which
// must have the request's id and no error. It returns the time from the
// first write to the answer's last byte, and the answer line (valid until
// the next read).
//
// The request is written while the answer is read, as a harness would: a
// peer that streams (echo) answers before the request is all written, and
// neither side's pipe holds a whole payload.
func (c *conn) payloadTrip(id int, pieces [][]byte) (time.Duration, []byte, error) {
	start := time.Now()
	werr := make(chan error, 1)
	go func() {
		for _, p := range pieces {
			c.w.Write(p)
		}
		werr <- c.w.Flush()
	}()
	for {
		line, err := c.r.ReadLine()
		d := time.Since(start)
		if err != nil {
			return d, nil, err
		}
		m, err := jsonrpc.ParseEnvelope(line)
		if err != nil {
			return d, nil, fmt.Errorf("unreadable answer %.200q: %w", line, err)
		}
		if m.ID == nil {
			continue // a notification
		}
		if err := <-werr; err != nil {
			return d, nil, err
		}
		if string(m.ID) != strconv.Itoa(id) {
			return d, nil, fmt.Errorf("answer to id %s arrived while waiting for %d", m.ID, id)
		}
		if m.Error != nil {
			return d, nil, fmt.Errorf("payload call %d answered with an error: %.300s", id, m.Error)
		}
		return d, line, nil
	}
}

// payloadSession relays calls of the given kinds with a payload of n bytes
// in one session of p against the payload kernel: per kind, one call and
// then reps more. An echo session sends the argument calls alone, which it
// answers with the same bytes.
func payloadSession(p peer, socket string, ps payloads, n, reps int, kinds []payloadKind, s *sample) error {
	c, _, done, err := open(p, socket)
	if err != nil {
		return err
	}
	hash := ""
	if p.command == nil {
		if hash, err = catalogHash(c); err != nil {
			done()
			return err
		}
	}
	if p.echo {
		kinds = []payloadKind{argument}
	}
	id := 10
	for _, k := range kinds {
		call := ps.call(k, n, hash)
		ds := make([]time.Duration, 0, reps)
		var first time.Duration
		for i := range reps + 1 {
			id++
			pieces := call(id)
			d, line, err := c.payloadTrip(id, pieces)
			if err == nil {
				err = checkPayloadAnswer(p, k, n, pieces, line)
			}
			if err != nil {
				done()
				return fmt.Errorf("%s of %d bytes: %w", k, n, err)
			}
			if i == 0 {
				first = d
			} else {
				ds = append(ds, d)
			}
		}
		s.payload[payloadKey{k, n}] = payloadStats{first: first, warm: median(ds)}
	}
	u, err := done()
	s.rssLoad[n] = u.rss
	return err
}

// checkPayloadAnswer checks that a payload call succeeded: an argument
// came back as Answer, a result as at least n bytes, an echo as the line
// sent.
func checkPayloadAnswer(p peer, k payloadKind, n int, sent [][]byte, line []byte) error {
	if p.echo {
		if want := len(bytes.Join(sent, nil)) - 1; len(line) != want {
			return fmt.Errorf("echo answered %d bytes, want %d", len(line), want)
		}
		return nil
	}
	if bytes.Contains(line, []byte(`"isError":true`)) {
		return fmt.Errorf("call failed: %.300s", line)
	}
	if k == argument && !bytes.Contains(line, []byte(synth.Answer)) {
		return fmt.Errorf("answered %.300s", line)
	}
	if k != argument && len(line) < n {
		return fmt.Errorf("answered %d bytes for a result of %d", len(line), n)
	}
	return nil
}

func median[T int64 | float64 | time.Duration](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
