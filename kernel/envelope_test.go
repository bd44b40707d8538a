package kernel

import (
	"encoding/json"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// TestEnvelopeNamesMatchExactly: the kernel reads a message's envelope as
// the shim and the kernel client do (docs/adr/0004). encoding/json would
// take "Method" for "method", "ID" for "id" and "Params" for "params", so
// the same line meant one thing to the shim and another to the kernel.
func TestEnvelopeNamesMatchExactly(t *testing.T) {
	h := startKernel(t, publicReader(t))
	c := h.dial()
	c.hello("cc")
	c.list()
	params, err := json.Marshal(c.invokeParams("c1", "files.read", map[string]string{"path": "/public/a.txt"}))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, line string
		id         string // of the answer
		code       int    // of the answer's error; 0 for a result
	}{
		{"Method is not a method", `{"jsonrpc":"2.0","id":1,"Method":"ping"}`, "1", jsonrpc.CodeInvalidRequest},
		{"METHOD is not a method", `{"jsonrpc":"2.0","id":2,"METHOD":"ping"}`, "2", jsonrpc.CodeInvalidRequest},
		{"JSONRPC is not the version", `{"JSONRPC":"2.0","id":3,"method":"ping"}`, "null", jsonrpc.CodeInvalidRequest},
		{"Params are not the params", `{"jsonrpc":"2.0","id":4,"method":"tools.invoke","Params":` + string(params) + `}`, "4", jsonrpc.CodeInvalidParams},
		{"a name spelt with an escape is that name", `{"jsonrpc":"2.0","id":5,"\u006dethod":"ping"}`, "5", 0},
		{"the last of a repeated name wins", `{"jsonrpc":"2.0","id":6,"method":"tools.frobnicate","method":"ping"}`, "6", 0},
		{"a valid request still works", `{"jsonrpc":"2.0","id":7,"method":"ping"}`, "7", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.sendRaw(tt.line)
			m := c.recv()
			code := 0
			if m.Error != nil {
				code = m.Error.Code
			}
			if string(m.ID) != tt.id || code != tt.code {
				t.Errorf("answer id %s, error %v; want id %s, error code %d", m.ID, m.Error, tt.id, tt.code)
			}
		})
	}

	// Without an id a line is a notification and gets no answer, so the
	// next answer read is the ping's.
	c.sendRaw(`{"jsonrpc":"2.0","ID":8,"method":"ping"}`)
	if m := c.call(kproto.MethodPing, struct{}{}); m.Error != nil {
		t.Errorf("ping after an ID line: %v", m.Error)
	}
	// The call refused for its "Params" runs when they are "params".
	c.sendRaw(`{"jsonrpc":"2.0","id":9,"method":"tools.invoke","params":` + string(params) + `}`)
	if m := c.recv(); string(m.ID) != "9" || invokeResult(t, m).Status != kproto.StatusSucceeded {
		t.Errorf("tools.invoke with params: %+v, want id 9 and a call that succeeded", m)
	}
}
