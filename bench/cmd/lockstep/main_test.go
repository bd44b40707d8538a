package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/bench/internal/synth"
)

// The test binary runs as lockstep itself when asked, so that the relay
// is tested as the benchmarks spawn it: a process on pipes.
func TestMain(m *testing.M) {
	if os.Getenv("LOCKSTEP_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// lockstep relays calls to a kernel one at a time and answers in order;
// the benchmarks trust its figures only because it does.
func TestRelaysCallsOneAtATime(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "k.sock")
	k, err := synth.Listen(socket, synth.Tools(4))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	cmd := exec.Command(os.Args[0], "serve", "--socket", socket)
	cmd.Env = append(os.Environ(), "LOCKSTEP_TEST_MAIN=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(outPipe)
	ask := func(line string) string {
		t.Helper()
		if _, err := in.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		answer, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("after %s: %v", line, err)
		}
		return answer
	}
	if a := ask(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`); !strings.Contains(a, `"id":1,"result":{"protocolVersion"`) {
		t.Errorf("initialize answered %s", a)
	}
	in.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
	for _, id := range []string{"2", `"three"`} {
		a := ask(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + synth.FirstTool + `","arguments":{"query":"relay"}}}`)
		if !strings.HasPrefix(a, `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":`) || !strings.Contains(a, synth.Answer) {
			t.Errorf("call %s answered %s", id, a)
		}
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("lockstep did not end cleanly at stdin's end: %v", err)
	}
}
