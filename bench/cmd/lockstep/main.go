// Command lockstep is the benchmarks' floor under a relay's added latency:
// the least any relay can do for one call at a time on this machine. It
// runs on one thread with blocking reads and writes on stdin, the kernel
// socket and stdout (no poller, no other goroutine), and for each
// tools/call line it writes one tools.invoke line, reads the answer line
// and writes one result line, touching the JSON only to find the id, the
// tool, the arguments and the answer's content.
//
// It is not a correct MCP relay and must not be used as one: it reads the
// next request only after answering the last (no pipelining, no ping or
// cancellation during a call), checks no peer, projects nothing, and
// answers every other request with an empty result. benchrelay measures it
// only where it bounds something: cold start and calls made one at a time.
//
// Usage: lockstep --socket PATH (other arguments are ignored, so that it
// takes serve's command line)
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// fd is a blocking file descriptor read and written with plain system
// calls.
type fd int

func (f fd) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(f), p)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f fd) write(b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(int(f), b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

type relay struct {
	kernel      fd
	kr          *jsonrpc.Reader
	buf         []byte
	kid         int
	catalogHash []byte // the quoted catalogHash, fetched before the first call
}

func main() {
	// Two Ps, though one goroutine runs: while it waits in a read the
	// other P is idle, so the runtime leaves it its P instead of taking
	// it back after 20 µs and handing it over again when the read returns.
	runtime.GOMAXPROCS(2)
	socket := ""
	for i, a := range os.Args {
		if (a == "--socket" || a == "-socket") && i+1 < len(os.Args) {
			socket = os.Args[i+1]
		}
	}
	// run ends at stdin's end (io.EOF) or on an error.
	if err := run(socket); !errors.Is(err, io.EOF) {
		fmt.Fprintln(os.Stderr, "lockstep:", err)
		os.Exit(1)
	}
}

func run(socket string) error {
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := unix.Connect(s, &unix.SockaddrUnix{Name: socket}); err != nil {
		return fmt.Errorf("dial %s: %w", socket, err)
	}
	for _, f := range []int{0, 1} {
		if err := unix.SetNonblock(f, false); err != nil {
			return err
		}
	}
	r := &relay{kernel: fd(s), kr: jsonrpc.NewReader(fd(s), jsonrpc.DefaultMaxLine)}
	if _, err := r.ask(kproto.MethodHello, []byte(`{"name":"bench","shim":{"name":"lockstep","version":"0"}}`)); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	in := jsonrpc.NewReader(fd(0), jsonrpc.DefaultMaxLine)
	for {
		line, err := in.ReadLine()
		if err != nil {
			return err
		}
		out, err := r.answer(line)
		if err != nil {
			return err
		}
		if out != nil {
			if err := fd(1).write(out); err != nil {
				return err
			}
		}
	}
}

// answer is the line to write for one stdin line, nil for none.
func (r *relay) answer(line []byte) ([]byte, error) {
	e, err := jsonrpc.ParseEnvelope(line)
	if err != nil || e.ID == nil {
		return nil, nil // not a request: nothing to answer
	}
	result := []byte(`{}`)
	switch string(e.Method) {
	case `"initialize"`:
		result = []byte(`{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"lockstep","version":"0"}}`)
	case `"tools/call"`:
		if result, err = r.call(e.Params); err != nil {
			return nil, err
		}
	}
	return jsonrpc.AppendResponse(nil, e.ID, result), nil
}

// call relays one tools/call and returns its result.
func (r *relay) call(params []byte) ([]byte, error) {
	if r.catalogHash == nil {
		res, err := r.ask(kproto.MethodList, []byte(`{}`))
		if err != nil {
			return nil, fmt.Errorf("tools.list: %w", err)
		}
		r.catalogHash, _ = member(res, `"catalogHash"`)
	}
	name, _ := member(params, `"name"`)
	args, ok := member(params, `"arguments"`)
	if !ok {
		args = []byte(`{}`)
	}
	p := append([]byte(`{"callId":"c`), strconv.Itoa(r.kid+1)...)
	p = append(append(append(p, `","tool":`...), name...), `,"arguments":`...)
	p = append(append(append(p, args...), `,"catalogHash":`...), r.catalogHash...)
	res, err := r.ask(kproto.MethodInvoke, append(p, '}'))
	if err != nil {
		return nil, fmt.Errorf("tools.invoke: %w", err)
	}
	if content, ok := member(res, `"content"`); ok {
		return append(append([]byte(`{"content":`), content...), '}'), nil
	}
	return []byte(`{"content":[{"type":"text","text":"refused"}],"isError":true}`), nil
}

// ask writes one kernel request and reads its answer's result.
func (r *relay) ask(method string, params []byte) ([]byte, error) {
	r.kid++
	b := append(r.buf[:0], `{"jsonrpc":"2.0","id":`...)
	b = append(append(strconv.AppendInt(b, int64(r.kid), 10), `,"method":"`...), method...)
	b = append(append(append(b, `","params":`...), params...), "}\n"...)
	r.buf = b
	if err := r.kernel.write(b); err != nil {
		return nil, err
	}
	line, err := r.kr.ReadLine()
	if err != nil {
		return nil, err
	}
	e, err := jsonrpc.ParseEnvelope(line)
	if err != nil {
		return nil, err
	}
	if e.Result == nil {
		return nil, fmt.Errorf("refused: %s", e.Error)
	}
	return e.Result, nil
}

// member is the value of the member named key (quoted) of the object obj.
func member(obj []byte, key string) (value []byte, ok bool) {
	jsonrpc.EachMember(obj, func(k, v []byte) error {
		if string(k) == key {
			value, ok = v, true
		}
		return nil
	})
	return value, ok
}
