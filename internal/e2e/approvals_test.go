package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/testbin"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
)

// Ask a person (issue 26), with real clients in front of the built binary
// and the reference kernel: the Go SDK client in both eras, with and
// without an elicitation handler, the TypeScript SDK client, the
// operator's commands, and a kernel stopped while a call waits.

// askKernel runs the reference kernel on root, letting every integration
// write under /public only once the person at the harness (or the
// operator) approves, holding a call at most hold.
func askKernel(t *testing.T, hold, root string) *kernelProcess {
	return startKernelProcessWith(t, `ask_timeout = "`+hold+`"`+"\n", askGrants, root)
}

const askGrants = `
[[grant]]
subject = "integration:*"
resource = "files:/public"
descendants = true
actions = ["write"]
ask = "harness"
`

// askRoot is a files root with the directory the grant covers.
func askRoot(t *testing.T) string {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "public"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// sdkSession connects the Go SDK client, with elicit as its elicitation
// handler (nil: it declares no elicitation), to serve in front of k, in
// the era version names ("" for the SDK's latest, 2026-07-28).
func sdkSession(t *testing.T, k *kernelProcess, version string, elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "approvals-e2e", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: elicit})
	cmd := exec.Command(testbin.Path(t), "serve", "--integration", "go-sdk", "--socket", k.sock)
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if version != "" && s.InitializeResult().ProtocolVersion != version {
		t.Fatalf("negotiated %s, want %s", s.InitializeResult().ProtocolVersion, version)
	}
	return s
}

// write calls files.write through s.
func write(t *testing.T, s *mcp.ClientSession, path, content string) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "files.write", Arguments: map[string]any{"path": path, "content": content}})
	if err != nil {
		t.Fatalf("files.write %s: %v", path, err)
	}
	return r
}

// refusedWith checks a result is the refusal code, and returns the
// approval id its _meta carries.
func refusedWith(t *testing.T, r *mcp.CallToolResult, code string) string {
	t.Helper()
	if !r.IsError || r.Meta["sharedos/code"] != code {
		raw, _ := json.Marshal(r)
		t.Fatalf("result %s, want denied %s", raw, code)
	}
	id, _ := r.Meta["sharedos/approvalId"].(string)
	return id
}

func fileHolds(t *testing.T, root, rel, want string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if got := string(b); got != want || err != nil && want != "" {
		t.Errorf("%s holds %q (%v), want %q", rel, got, err, want)
	}
}

// recordsOf reads the kernel's audit log.
func recordsOf(t *testing.T, k *kernelProcess) []audit.Event {
	t.Helper()
	b, err := os.ReadFile(k.audit)
	if err != nil {
		t.Fatal(err)
	}
	return parseEvents(t, b)
}

// answering is an elicitation handler that answers every question with
// result and keeps the questions.
type answering struct {
	result mcp.ElicitResult
	mu     sync.Mutex
	asked  []string
}

func (a *answering) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, req.Params.Message)
	r := a.result
	return &r, nil
}

func (a *answering) questions() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...)
}

// TestGoSDKElicitationDecidesAHeldCall: in the legacy era
// (elicitation/create) and in 2026-07-28 (the input-required result and
// the retry the SDK makes), the person's answer decides the call the
// kernel holds: accept with approve true runs it, decline and accept
// with approve false refuse it approval_declined, cancel answers
// approval_pending. The question says who asks to do what, where, with
// which arguments, control characters escaped; other arguments ask again.
func TestGoSDKElicitationDecidesAHeldCall(t *testing.T) {
	root := askRoot(t)
	k := askKernel(t, "1m", root)
	for _, era := range []string{"2025-11-25", ""} {
		name := era
		if name == "" {
			name = "2026-07-28"
		}
		t.Run(name, func(t *testing.T) {
			yes := &answering{result: mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}
			s := sdkSession(t, k, era, yes.handle)
			if r := write(t, s, "/public/yes-"+name+".txt", "one\x1b[2J"); r.IsError {
				raw, _ := json.Marshal(r)
				t.Fatalf("accepted: %s", raw)
			}
			fileHolds(t, root, "public/yes-"+name+".txt", "one\x1b[2J")
			q := yes.questions()
			if len(q) != 1 || !strings.HasPrefix(q[0], "go-sdk asks to run files.write: write on files:/public/yes-"+name+".txt.\nArguments: {\"content\":\"one\\u001b[2J\",") {
				t.Errorf("the question: %q", q)
			}
			write(t, s, "/public/yes-"+name+".txt", "two")
			if n := len(yes.questions()); n != 2 {
				t.Errorf("other arguments asked %d times in all, want 2", n)
			}

			for _, answer := range []mcp.ElicitResult{{Action: "decline"}, {Action: "accept", Content: map[string]any{"approve": false}}} {
				no := &answering{result: answer}
				s := sdkSession(t, k, era, no.handle)
				path := "/public/no-" + name + "-" + answer.Action + ".txt"
				if id := refusedWith(t, write(t, s, path, "x"), kproto.CodeApprovalDeclined); !strings.HasPrefix(id, "apr_") {
					t.Errorf("declined without an approval id: %q", id)
				}
				// Not asked again in the turn.
				refusedWith(t, write(t, s, path, "x"), kproto.CodeApprovalDeclined)
				if n := len(no.questions()); n != 1 {
					t.Errorf("%s: asked %d times, want once", answer.Action, n)
				}
				fileHolds(t, root, strings.TrimPrefix(path, "/"), "")
			}

			dismiss := &answering{result: mcp.ElicitResult{Action: "cancel"}}
			s = sdkSession(t, k, era, dismiss.handle)
			if id := refusedWith(t, write(t, s, "/public/later-"+name+".txt", "x"), kproto.CodeApprovalPending); !strings.HasPrefix(id, "apr_") {
				t.Errorf("cancelled without an approval id: %q", id)
			}
		})
	}
	granted := 0
	for _, e := range eventsNamed(recordsOf(t, k), audit.EventApprovalGranted) {
		if e.By != "harness" || e.Integration != "go-sdk" {
			t.Errorf("granted record %+v", e)
		}
		granted++
	}
	if granted != 4 {
		t.Errorf("%d approvals recorded, want 4", granted)
	}
}

// TestAQuestionNobodyAnswersEndsAtAskTimeout: the Go SDK client's handler
// never answers; at ask_timeout the kernel answers approval_pending and
// the shim withdraws the question (notifications/cancelled, which ends
// the handler's wait).
func TestAQuestionNobodyAnswersEndsAtAskTimeout(t *testing.T) {
	root := askRoot(t)
	k := askKernel(t, "1s", root)
	withdrawn := make(chan error, 1)
	s := sdkSession(t, k, "2025-11-25", func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		<-ctx.Done()
		withdrawn <- ctx.Err()
		return nil, ctx.Err()
	})
	refusedWith(t, write(t, s, "/public/silent.txt", "x"), kproto.CodeApprovalPending)
	select {
	case err := <-withdrawn:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the handler's wait ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the question was never withdrawn")
	}
	fileHolds(t, root, "public/silent.txt", "")
}

// TestAClientWithoutElicitationIsApprovedOutOfBand: a client that cannot
// be asked has its call held and answered approval_pending, with the
// approval's id in _meta; the operator's approvals and approve (the
// built binary, over the socket) let the same call's retry run, once.
func TestAClientWithoutElicitationIsApprovedOutOfBand(t *testing.T) {
	root := askRoot(t)
	k := askKernel(t, "200ms", root)
	s := sdkSession(t, k, "", nil)
	id := refusedWith(t, write(t, s, "/public/oob.txt", "out of band"), kproto.CodeApprovalPending)
	text := runOK(t, exec.Command(testbin.Path(t), "approvals", "--socket", k.sock))
	if !strings.Contains(text, id+"  go-sdk") || !strings.Contains(text, `{"content":"out of band","path":"/public/oob.txt…`) {
		t.Errorf("approvals:\n%s", text)
	}
	if out := runOK(t, exec.Command(testbin.Path(t), "approve", id, "--socket", k.sock)); !strings.HasPrefix(out, "approved "+id+": files.write by go-sdk on files:/public/oob.txt") {
		t.Errorf("approve: %s", out)
	}
	if r := write(t, s, "/public/oob.txt", "out of band"); r.IsError {
		raw, _ := json.Marshal(r)
		t.Fatalf("the retry: %s", raw)
	}
	fileHolds(t, root, "public/oob.txt", "out of band")
	refusedWith(t, write(t, s, "/public/oob.txt", "out of band"), kproto.CodeApprovalPending)
}

// runOK runs a command that must succeed and returns its stdout.
func runOK(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, stderr.String())
	}
	return string(out)
}

// TestTheOperatorDecidesWhileTheHarnessIsAsked: the first decision wins.
// While the Go SDK client's person thinks, the operator approves; the
// question is withdrawn (the handler's wait ends) and the call runs.
func TestTheOperatorDecidesWhileTheHarnessIsAsked(t *testing.T) {
	root := askRoot(t)
	k := askKernel(t, "1m", root)
	asked := make(chan string, 1)
	withdrawn := make(chan struct{})
	s := sdkSession(t, k, "2025-11-25", func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked <- req.Params.Message
		<-ctx.Done()
		close(withdrawn)
		return &mcp.ElicitResult{Action: "decline"}, nil
	})
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "files.write", Arguments: map[string]any{"path": "/public/race.txt", "content": "op"}})
		if err != nil {
			r = &mcp.CallToolResult{IsError: true}
		}
		done <- r
	}()
	msg := <-asked
	i := strings.Index(msg, "Approval apr_")
	if i < 0 {
		t.Fatalf("the question names no approval: %q", msg)
	}
	id := strings.Fields(msg[i+len("Approval "):])[0]
	id = strings.TrimSuffix(id, ",")
	runOK(t, exec.Command(testbin.Path(t), "approve", id, "--socket", k.sock))
	if r := <-done; r.IsError {
		raw, _ := json.Marshal(r)
		t.Fatalf("the call the operator approved: %s", raw)
	}
	<-withdrawn
	fileHolds(t, root, "public/race.txt", "op")
	cmd := exec.Command(testbin.Path(t), "deny", id, "--socket", k.sock)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "was already approved by the operator, and the call ran") {
		t.Errorf("a second decision: %v\n%s", err, stderr.String())
	}
	g := eventsNamed(recordsOf(t, k), audit.EventApprovalGranted)
	if len(g) != 1 || g[0].By != "operator" || len(eventsNamed(recordsOf(t, k), audit.EventApprovalDeclined)) != 0 {
		t.Errorf("decisions recorded: %+v", g)
	}
}

// TestAKernelStoppedWhileACallWaits: the held call is answered when the
// kernel stops; nothing is written, and the kernel started next knows no
// approval of the old one.
func TestAKernelStoppedWhileACallWaits(t *testing.T) {
	root := askRoot(t)
	k := askKernel(t, "1m", root)
	s := sdkSession(t, k, "", nil)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, _ := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "files.write", Arguments: map[string]any{"path": "/public/restart.txt", "content": "r"}})
		done <- r
	}()
	var id string
	for deadline := time.Now().Add(20 * time.Second); id == ""; {
		var list kproto.ApprovalsListResult
		out := runOK(t, exec.Command(testbin.Path(t), "approvals", "--json", "--socket", k.sock))
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Approvals) > 0 {
			id = list.Approvals[0].ID
		} else if time.Now().After(deadline) {
			t.Fatal("the call never waited for approval")
		}
	}
	k.stop(t)
	r := <-done
	if r == nil || !r.IsError || r.Meta["sharedos/code"] != kproto.CodeCancelled && r.Meta["sharedos/code"] != kproto.CodeKernelUnavailable {
		raw, _ := json.Marshal(r)
		t.Fatalf("the held call when the kernel stopped: %s", raw)
	}
	evs := recordsOf(t, k)
	if len(eventsNamed(evs, audit.EventApprovalRequested)) != 1 || len(eventsNamed(evs, audit.EventApprovalGranted)) != 0 || len(eventsNamed(evs, audit.EventToolAuthorized)) != 0 {
		t.Errorf("records: requested %d, granted %d, authorized %d", len(eventsNamed(evs, audit.EventApprovalRequested)),
			len(eventsNamed(evs, audit.EventApprovalGranted)), len(eventsNamed(evs, audit.EventToolAuthorized)))
	}
	next := askKernel(t, "1m", root)
	cmd := exec.Command(testbin.Path(t), "approve", id, "--socket", next.sock)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "never existed, it expired, or the kernel restarted") {
		t.Errorf("the old approval at the next kernel: %v\n%s", err, stderr.String())
	}
	fileHolds(t, root, "public/restart.txt", "")
}

// TestTypeScriptSDKElicitation: the TypeScript SDK client (testdata/tsclient,
// installed by its lockfile as .ci/run does) answers the shim's
// elicitation/create: approve runs the call, decline refuses it.
func TestTypeScriptSDKElicitation(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		needsNPM(t, "node is not installed: this test drives the TypeScript SDK client (CI has node)")
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "tsclient"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		needsNPM(t, "the TypeScript SDK client is not installed: run npm ci --prefix internal/e2e/testdata/tsclient, as .ci/run does (%v)", err)
	}
	root := askRoot(t)
	k := askKernel(t, "1m", root)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := exec.CommandContext(ctx, "node", "elicit.mjs", testbin.Path(t), k.sock)
	client.Dir = dir
	var stderr strings.Builder
	client.Stderr = &stderr
	out, err := client.Output()
	if err != nil {
		t.Fatalf("the TypeScript client failed: %v\n%s", err, stderr.String())
	}
	var said []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		said = append(said, sc.Text())
	}
	want := []string{
		"asked: ts-sdk asks to run files.write: write on files:/public/ts-yes.txt.",
		"approve: ok",
		"asked: ts-sdk asks to run files.write: write on files:/public/ts-no.txt.",
		"decline: error approval_declined",
	}
	if strings.Join(said, "\n") != strings.Join(want, "\n") {
		t.Errorf("the client said\n%s\nwant\n%s", strings.Join(said, "\n"), strings.Join(want, "\n"))
	}
	fileHolds(t, root, "public/ts-yes.txt", "from typescript")
	fileHolds(t, root, "public/ts-no.txt", "")
}
