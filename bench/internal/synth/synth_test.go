package synth

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

func TestPayloadStringIsAJSONStringOfExactlyTheSizeAsked(t *testing.T) {
	for _, n := range []int{2, 3, 57, 4096, 1 << 20} {
		p := PayloadString(n)
		if len(p) != n {
			t.Fatalf("PayloadString(%d) is %d bytes", n, len(p))
		}
		var s string
		if err := json.Unmarshal(p, &s); err != nil {
			t.Fatalf("PayloadString(%d) is not a JSON string: %v", n, err)
		}
		if !bytes.Equal(p, PayloadString(n)) {
			t.Fatalf("PayloadString(%d) is not the same twice", n)
		}
		if n >= 4096 {
			// Text shaped like source code: escapes every dozen bytes
			// or so, not a run of letters.
			if escapes := bytes.Count(p, []byte(`\`)); escapes < n/20 || escapes > n/6 {
				t.Fatalf("PayloadString(%d) has %d escapes", n, escapes)
			}
		}
	}
}

// call sends one request on c and returns its result.
func call(t *testing.T, c net.Conn, r *bufio.Reader, id int, method, params string) json.RawMessage {
	t.Helper()
	line := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"` + method + `","params":` + params + "}\n"
	if _, err := c.Write([]byte(line)); err != nil {
		t.Fatal(err)
	}
	answer, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		ID     int
		Result json.RawMessage
	}
	if err := json.Unmarshal(answer, &m); err != nil || m.ID != id {
		t.Fatalf("answer %.200q to %d: %v", answer, id, err)
	}
	return m.Result
}

func TestPayloadCallsAreAnsweredInTheShapeAsked(t *testing.T) {
	dir, err := os.MkdirTemp("", "syn")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "k.sock")
	k, err := Listen(sock, PayloadTools())
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	call(t, c, r, 1, kproto.MethodHello, `{"name":"test","shim":{"version":"0"}}`)

	const n = 300 << 10
	var text string
	if err := json.Unmarshal(PayloadString(n), &text); err != nil {
		t.Fatal(err)
	}
	var content struct {
		Status  string
		Content []struct{ Type, Text string }
	}
	res := call(t, c, r, 2, kproto.MethodInvoke, `{"callId":"c1","tool":"`+PayloadTool+`","arguments":{"result":"content","bytes":`+strconv.Itoa(n)+`}}`)
	if err := json.Unmarshal(res, &content); err != nil || content.Status != kproto.StatusSucceeded || len(content.Content) != 1 || content.Content[0].Text != text {
		t.Fatalf("content result: %v, %.200s", err, res)
	}
	var output struct {
		Status string
		Output struct{ Text string }
	}
	res = call(t, c, r, 3, kproto.MethodInvoke, `{"callId":"c2","tool":"`+PayloadTool+`","arguments":{"result":"output","bytes":`+strconv.Itoa(n)+`}}`)
	if err := json.Unmarshal(res, &output); err != nil || output.Status != kproto.StatusSucceeded || output.Output.Text != text {
		t.Fatalf("output result: %v, %.200s", err, res)
	}
	args := string(slices.Concat([]byte(`{"callId":"c3","tool":"`+PayloadTool+`","arguments":{"text":`), PayloadString(n), []byte(`}}`)))
	if res := call(t, c, r, 4, kproto.MethodInvoke, args); !bytes.Contains(res, []byte(Answer)) {
		t.Fatalf("argument call answered %.200s", res)
	}
	if res := call(t, c, r, 5, kproto.MethodInvoke, `{"callId":"c4","tool":"`+FirstTool+`","arguments":{"query":"x"}}`); !bytes.Contains(res, []byte(Answer)) {
		t.Fatalf("a plain call answered %.200s", res)
	}
}
