package main

import (
	"encoding/json"
	"net"
	"sync"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// holdProxy is the kernel the shim sees in the cancellation case: it
// stands on the installed socket in front of the reference kernel and
// relays every line both ways, except the calls hold selects, which it
// keeps without forwarding until the shim sends call.cancel for them.
// It then answers failed/cancelled, as the protocol asks of a kernel.
// Everything else (hello, the catalogue and its hash, other calls, the
// audit log) is the reference kernel's own, so the column's catalogHash
// does not change.
type holdProxy struct {
	ln       *net.UnixListener
	upstream string
	hold     func(kproto.InvokeParams) bool

	wg sync.WaitGroup

	mu        sync.Mutex
	held      []heldCall
	conns     []net.Conn
	cancelled chan struct{} // closed at the first call.cancel for a held call
}

// heldCall is one call the proxy kept from the reference kernel.
type heldCall struct {
	CallID      string
	Tool        string
	Args        json.RawMessage
	At          time.Time
	CancelledAt time.Time // zero when no call.cancel came for it
}

// startHoldProxy listens on path and relays each connection to upstream.
func startHoldProxy(path, upstream string, hold func(kproto.InvokeParams) bool) (*holdProxy, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	p := &holdProxy{ln: ln, upstream: upstream, hold: hold, cancelled: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *holdProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.AcceptUnix()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.relay(c)
		}()
	}
}

// relay serves one shim connection until it ends, then ends the upstream
// one, so the reference kernel sees the turn end when the shim does.
func (p *holdProxy) relay(down *net.UnixConn) {
	defer down.Close()
	up, err := net.Dial("unix", p.upstream)
	if err != nil {
		return
	}
	var wmu sync.Mutex
	send := func(line []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		down.Write(line)
	}
	back := make(chan struct{})
	go func() {
		defer close(back)
		r := jsonrpc.NewReader(up, 0)
		for {
			line, err := r.ReadLine()
			if err != nil {
				down.CloseWrite()
				return
			}
			send(withNewline(line))
		}
	}()
	held := map[string]json.RawMessage{} // request id by callId
	r := jsonrpc.NewReader(down, 0)
	for {
		line, err := r.ReadLine()
		if err != nil {
			break
		}
		var m jsonrpc.Message
		if json.Unmarshal(line, &m) == nil {
			switch m.Method {
			case kproto.MethodInvoke:
				var ip kproto.InvokeParams
				if json.Unmarshal(m.Params, &ip) == nil && p.hold(ip) {
					held[ip.CallID] = m.ID
					p.mu.Lock()
					p.held = append(p.held, heldCall{CallID: ip.CallID, Tool: ip.Tool, Args: ip.Arguments, At: time.Now()})
					p.mu.Unlock()
					continue
				}
			case kproto.MethodCancel:
				var cp kproto.CancelParams
				if json.Unmarshal(m.Params, &cp) == nil {
					if id, ok := held[cp.CallID]; ok {
						delete(held, cp.CallID)
						p.noteCancel(cp.CallID)
						send(jsonrpc.AppendResponse(nil, id, mustMarshal(kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeCancelled})))
						continue
					}
				}
			}
		}
		if _, err := up.Write(withNewline(line)); err != nil {
			break
		}
	}
	up.Close()
	<-back
}

func (p *holdProxy) noteCancel(callID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.held {
		if p.held[i].CallID == callID && p.held[i].CancelledAt.IsZero() {
			p.held[i].CancelledAt = time.Now()
			select {
			case <-p.cancelled:
			default:
				close(p.cancelled)
			}
		}
	}
}

// awaitCancel waits until a held call has been cancelled, or at most d.
func (p *holdProxy) awaitCancel(d time.Duration) {
	select {
	case <-p.cancelled:
	case <-time.After(d):
	}
}

// calls returns what the proxy held so far.
func (p *holdProxy) calls() []heldCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]heldCall(nil), p.held...)
}

// close stops accepting, ends every connection and waits for them.
func (p *holdProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// withNewline copies line (which the reader may reuse) and ends it.
func withNewline(line []byte) []byte {
	b := make([]byte, len(line)+1)
	copy(b, line)
	b[len(line)] = '\n'
	return b
}
