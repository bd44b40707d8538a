package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
)

// Grades. A case passes only when the evidence shows the declared call
// reached the kernel and came back as the case requires; a harness that
// never made the call is "not exercised", whatever else it did.
const (
	gradePass         = "pass"
	gradeFail         = "fail"
	gradeNotExercised = "not exercised"
	gradeUnavailable  = "not available"
	// gradeCarriesOn: with the kernel down, the harness ran the turn
	// without the server instead of refusing to start. That is the
	// harness's choice, not a fault of the shim; doctor and the install
	// guides say which harnesses make it.
	gradeCarriesOn = "carries on without it"
)

// The files root every case starts from (kernel.toml grants on it).
var fixtures = map[string]string{
	"granted/readme.txt":      "granted-content-7f3a\n",
	"granted/notes/todo.txt":  "nothing yet\n",
	"granted/drafts/.keep":    "",
	"outside/secret.txt":      "outside-secret-91c2\n",
	"expired/old.txt":         "expired-content-44d0\n",
	"granted/notes/later.txt": "later\n",
	"granted/asked/.keep":     "",
}

func writeFixtures(root string) error {
	for rel, content := range fixtures {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// evidence is everything a case is graded from.
type evidence struct {
	audit     []audit.Event
	exchanges []exchange
	held      []heldCall // calls the hold proxy kept from the kernel
	root      string     // the files root after the run
	exitErr   error      // the harness process's exit
	stdout    string
	output    string                  // stdout and stderr, as a person running the harness sees them
	sock      string                  // the socket install pointed the entry at
	upstream  []testupstream.Recorded // the calls the brokered test upstream received
	elicited  string                  // what the harness's elicitation hook was given, when it ran
}

// reachedUpstream reports whether the test upstream received a call of
// its tool named tool.
func (e *evidence) reachedUpstream(tool string) bool {
	for _, r := range e.upstream {
		if r.Tool == tool {
			return true
		}
	}
	return false
}

// invocations returns the kernel's tool.invoked events for tool.
func (e *evidence) invocations(tool string) []audit.Event {
	var out []audit.Event
	for _, ev := range e.audit {
		if ev.Event == audit.EventToolInvoked && ev.Tool == tool {
			out = append(out, ev)
		}
	}
	return out
}

// result is the tool result the harness sent back for round r's call.
func (e *evidence) result(r int) (ToolResult, bool) {
	for _, ex := range e.exchanges {
		for _, res := range ex.Results {
			if res.Round == r {
				return res, true
			}
		}
	}
	return ToolResult{}, false
}

// offeredTools is every tool name the harness offered its model.
func (e *evidence) offeredTools() []string { return offered(e.exchanges) }

// finalAt is when the final answer after round rounds was served.
func (e *evidence) finalAt(rounds int) (time.Time, bool) {
	for _, ex := range e.exchanges {
		if ex.Round == rounds && ex.Answer == "text" {
			return ex.At, true
		}
	}
	return time.Time{}, false
}

// finished reports whether the model was asked for its final answer after
// the script's last round, and the harness exited cleanly.
func (e *evidence) finished(rounds int) error {
	for _, ex := range e.exchanges {
		if ex.Round == rounds && ex.Answer == "text" {
			if e.exitErr != nil {
				return fmt.Errorf("the final answer was served but the harness exited with %v", e.exitErr)
			}
			return nil
		}
	}
	return fmt.Errorf("the turn never came back for its final answer")
}

// Case is one scripted turn and how to grade it.
type Case struct {
	ID    string
	Title string
	Steps [][]Call
	// Hold selects the calls a hold proxy in front of the kernel keeps
	// unanswered until they are cancelled; ToolTimeout replaces the
	// harness's tool-call timeout that install wrote.
	Hold        func(kproto.InvokeParams) bool
	ToolTimeout time.Duration
	// NoKernel: no kernel listens on the socket install wrote, so serve
	// fails at start-up.
	NoKernel bool
	// Elicit is how the person at the harness answers a question the
	// shim asks through MCP elicitation ("accept", "decline"), where the
	// harness lets a headless run answer it (Claude Code's Elicitation
	// hook); "" asks nothing of the harness.
	Elicit string
	grade  func(e *evidence, h *harness) (string, string)
}

// heldPath is the file the cancellation case reads; the hold proxy keeps
// that read from the kernel.
const heldPath = "/granted/notes/held.txt"

// toolTimeout is the harness tool-call timeout of the cancellation case:
// short, so the case stays fast, and at Claude Code's 1 s floor or above.
const toolTimeout = 2 * time.Second

func read(path string) Call { return Call{Tool: "files.read", Args: map[string]any{"path": path}} }

// expectRefusal grades a single call that the kernel must refuse with
// status denied and code.
func expectRefusal(tool, code, leak string) func(*evidence, *harness) (string, string) {
	return func(e *evidence, h *harness) (string, string) {
		inv := e.invocations(tool)
		res, answered := e.result(0)
		if len(inv) == 0 {
			if answered {
				return gradeNotExercised, fmt.Sprintf("the kernel never saw %s; the harness answered the model itself: %s", tool, clip(res.Text))
			}
			return gradeNotExercised, fmt.Sprintf("the kernel never saw %s", tool)
		}
		if inv[0].Status != kproto.StatusDenied || inv[0].Code != code {
			return gradeFail, fmt.Sprintf("kernel recorded %s/%s, want denied/%s", inv[0].Status, inv[0].Code, code)
		}
		if !answered {
			return gradeFail, "the harness never returned the tool result to the model"
		}
		if msg := h.refusalReported(res, code); msg != "" {
			return gradeFail, msg
		}
		if leak != "" && strings.Contains(res.Text, leak) {
			return gradeFail, "the refused content reached the model"
		}
		if err := e.finished(1); err != nil {
			return gradeFail, err.Error()
		}
		return gradePass, fmt.Sprintf("denied/%s; the model saw an error result and the turn ended with the final answer", code)
	}
}

var cases = []Case{
	{
		ID: "read-granted", Title: "authorized read",
		Steps: [][]Call{{read("/granted/readme.txt")}},
		grade: func(e *evidence, h *harness) (string, string) {
			inv := e.invocations("files.read")
			if len(inv) == 0 {
				return gradeNotExercised, "the kernel never saw files.read"
			}
			if inv[0].Status != kproto.StatusSucceeded {
				return gradeFail, fmt.Sprintf("kernel recorded %s/%s, want succeeded", inv[0].Status, inv[0].Code)
			}
			res, ok := e.result(0)
			if !ok || res.IsError || !strings.Contains(res.Text, "granted-content-7f3a") {
				return gradeFail, fmt.Sprintf("the model did not get the file's content: %s", clip(res.Text))
			}
			if err := e.finished(1); err != nil {
				return gradeFail, err.Error()
			}
			return gradePass, "succeeded; the content reached the model"
		},
	},
	{
		ID: "read-outside", Title: "read outside the grant",
		Steps: [][]Call{{read("/outside/secret.txt")}},
		grade: expectRefusal("files.read", kproto.CodeNoMatchingGrant, "outside-secret-91c2"),
	},
	{
		ID: "unpublished-tool", Title: "guessed unpublished tool",
		Steps: [][]Call{{{Tool: "files.delete", Args: map[string]any{"path": "/granted/readme.txt"}}}},
		grade: expectRefusal("files.delete", kproto.CodeToolUnavailable, ""),
	},
	{
		ID: "write-no-grant", Title: "write without a write grant",
		Steps: [][]Call{{{Tool: "files.write", Args: map[string]any{"path": "/granted/readme.txt", "content": "overwritten"}}}},
		grade: func(e *evidence, h *harness) (string, string) {
			g, why := expectRefusal("files.write", kproto.CodeNoMatchingGrant, "")(e, h)
			if b, err := os.ReadFile(filepath.Join(e.root, "granted", "readme.txt")); err != nil || string(b) != fixtures["granted/readme.txt"] {
				return gradeFail, "the file changed on disk"
			}
			return g, why
		},
	},
	{
		ID: "expired-grant", Title: "expired grant",
		Steps: [][]Call{{read("/expired/old.txt")}},
		grade: expectRefusal("files.read", kproto.CodeGrantExpired, "expired-content-44d0"),
	},
	{
		ID: "escalation", Title: "escalate, then a later call",
		Steps: [][]Call{
			{{Tool: "sharedos.escalate", Args: map[string]any{"reason": "conformance: need a person"}}},
			{read("/granted/readme.txt")},
		},
		grade: func(e *evidence, h *harness) (string, string) {
			var escalated bool
			for _, ev := range e.audit {
				escalated = escalated || ev.Event == audit.EventTurnEscalated
			}
			if !escalated {
				if res, ok := e.result(0); ok {
					return gradeNotExercised, "the kernel recorded no escalation; the harness answered: " + clip(res.Text)
				}
				return gradeNotExercised, "the kernel recorded no escalation"
			}
			first, ok := e.result(0)
			if !ok || first.IsError || !strings.Contains(first.Text, "escalated") {
				return gradeFail, "the escalation's result did not reach the model: " + clip(first.Text)
			}
			if inv := e.invocations("files.read"); len(inv) > 0 {
				return gradeFail, fmt.Sprintf("a call after the escalation reached the kernel (%s/%s)", inv[0].Status, inv[0].Code)
			}
			later, ok := e.result(1)
			if !ok {
				return gradeNotExercised, "the harness did not make the call after the escalation"
			}
			if msg := h.refusalReported(later, kproto.CodeEscalationPending); msg != "" {
				return gradeFail, "later call: " + msg
			}
			if err := e.finished(2); err != nil {
				return gradeFail, err.Error()
			}
			return gradePass, "turn.escalated recorded; the later call was refused escalation_pending and the turn ended"
		},
	},
	{
		ID: "output-schema", Title: "structured result (files.list has an outputSchema)",
		Steps: [][]Call{{{Tool: "files.list", Args: map[string]any{"path": "/granted"}}}},
		grade: func(e *evidence, h *harness) (string, string) {
			inv := e.invocations("files.list")
			if len(inv) == 0 {
				return gradeNotExercised, "the kernel never saw files.list"
			}
			if inv[0].Status != kproto.StatusSucceeded {
				return gradeFail, fmt.Sprintf("kernel recorded %s/%s, want succeeded", inv[0].Status, inv[0].Code)
			}
			res, ok := e.result(0)
			if !ok || res.IsError {
				return gradeFail, "no successful result reached the model"
			}
			for _, want := range []string{`"entries"`, `"readme.txt"`, `"truncated"`} {
				if !strings.Contains(res.Text, want) {
					return gradeFail, fmt.Sprintf("the result the model saw lacks %s: %s", want, clip(res.Text))
				}
			}
			if err := e.finished(1); err != nil {
				return gradeFail, err.Error()
			}
			return gradePass, "the structured entries reached the model"
		},
	},
	{
		// test.get_repo is published (integration:* may read the
		// repositories of sharedos); this call names another owner's. What
		// the upstream would have answered ("other/secret") is also the
		// refusal's resource, so the proof it did not leak is that the
		// upstream never received the call.
		ID: "broker-out-of-scope", Title: "brokered tool, argument outside the grant",
		Steps: [][]Call{{{Tool: "test.get_repo", Args: map[string]any{"owner": "other", "repo": "secret"}}}},
		grade: func(e *evidence, h *harness) (string, string) {
			g, why := expectRefusal("test.get_repo", kproto.CodeNoMatchingGrant, "")(e, h)
			if e.reachedUpstream("get_repo") {
				return gradeFail, "the refused call reached the upstream"
			}
			if inv := e.invocations("test.get_repo"); len(inv) > 0 && (inv[0].Upstream != "test" || inv[0].Resource != "test:/repos/other/secret") {
				return gradeFail, fmt.Sprintf("the kernel recorded upstream %q, resource %q; want test, test:/repos/other/secret", inv[0].Upstream, inv[0].Resource)
			}
			if g == gradePass {
				why += "; the upstream never received it"
			}
			return g, why
		},
	},
	{
		// test.env is offered by the upstream but no grant allows it, so
		// it is not published: deny by default.
		ID: "broker-ungranted", Title: "brokered tool no grant allows",
		Steps: [][]Call{{{Tool: "test.env", Args: map[string]any{}}}},
		grade: func(e *evidence, h *harness) (string, string) {
			if slices.ContainsFunc(e.offeredTools(), func(n string) bool { return strings.Contains(n, "test_env") || n == "test.env" }) {
				return gradeFail, "the ungranted test.env was offered to the model"
			}
			if e.reachedUpstream("env") {
				return gradeFail, "the ungranted call reached the upstream"
			}
			return expectRefusal("test.env", kproto.CodeToolUnavailable, "PATH=")(e, h)
		},
	},
	{
		ID: "ask-approved", Title: "a write a person must approve, approved",
		Steps:  [][]Call{{{Tool: "files.write", Args: map[string]any{"path": askedPath("approved"), "content": askedContent}}}},
		Elicit: "accept",
		grade:  gradeAsk(true),
	},
	{
		ID: "ask-declined", Title: "a write a person must approve, declined",
		Steps:  [][]Call{{{Tool: "files.write", Args: map[string]any{"path": askedPath("declined"), "content": askedContent}}}},
		Elicit: "decline",
		grade:  gradeAsk(false),
	},
	{
		ID: "kernel-down", Title: "no kernel running when the harness starts",
		Steps:    [][]Call{{read("/granted/readme.txt")}},
		NoKernel: true,
		grade:    gradeKernelDown,
	},
	{
		ID: "cancellation", Title: "cancellation / harness timeout",
		Steps: [][]Call{{read(heldPath)}},
		Hold: func(p kproto.InvokeParams) bool {
			var a struct{ Path string }
			return p.Tool == "files.read" && json.Unmarshal(p.Arguments, &a) == nil && a.Path == heldPath
		},
		ToolTimeout: toolTimeout,
		grade:       gradeCancellation,
	},
}

// askedContent is what the ask cases write.
const askedContent = "asked-content-5e0b"

// askedPath is where an ask case writes: under /granted/asked, which
// kernel.toml lets every integration write only once the person at the
// harness approves (ask = "harness").
func askedPath(name string) string { return "/granted/asked/" + name + ".txt" }

// gradeAsk grades a write the kernel holds until the person at the
// harness decides (approve: they approve it; else they decline it). It
// passes when the kernel recorded the request, then the harness's
// decision (by harness), then the call's outcome, and the model saw it:
// the write's result, or an approval_declined error. A harness whose
// person could not be asked, or gave no decision, leaves the call
// approval_pending: not exercised, with the kernel's record of why.
func gradeAsk(approve bool) func(e *evidence, h *harness) (string, string) {
	return func(e *evidence, h *harness) (string, string) {
		inv := e.invocations("files.write")
		res, answered := e.result(0)
		if len(inv) == 0 {
			if answered {
				return gradeNotExercised, "the kernel never saw files.write; the harness answered the model itself: " + clip(res.Text)
			}
			return gradeNotExercised, "the kernel never saw files.write"
		}
		var requested, granted, declined []audit.Event
		for _, ev := range e.audit {
			switch ev.Event {
			case audit.EventApprovalRequested:
				requested = append(requested, ev)
			case audit.EventApprovalGranted:
				granted = append(granted, ev)
			case audit.EventApprovalDeclined:
				declined = append(declined, ev)
			}
		}
		if len(requested) == 0 {
			return gradeFail, fmt.Sprintf("the kernel recorded %s/%s without holding the call for approval", inv[0].Status, inv[0].Code)
		}
		// Who answered the shim's question: the runner's Elicitation hook
		// standing in for the person, or, with no hook run, the harness
		// itself (a headless run with no dialog).
		how := "the harness answered the shim's elicitation/create by itself, with no person or hook asked"
		if e.elicited != "" {
			how = "the harness's Elicitation hook answered the shim's elicitation/create for its person (" + clip(e.elicited) + ")"
		}
		written, _ := os.ReadFile(filepath.Join(e.root, filepath.FromSlash(strings.TrimPrefix(inv[0].Resource, "files:/"))))
		last := inv[len(inv)-1]
		switch {
		case last.Code == kproto.CodeApprovalPending:
			if !answered {
				return gradeFail, "the call was answered approval_pending, and the harness never returned it to the model"
			}
			if msg := h.refusalReported(res, kproto.CodeApprovalPending); msg != "" {
				return gradeFail, msg
			}
			return gradeNotExercised, "the person could not be asked, or gave no decision, in a headless run: " + last.Reason +
				"; the call was held, then answered approval_pending, which reached the model"
		case approve && e.elicited == "" && len(declined) == 1 && declined[0].By == "harness" && last.Code == kproto.CodeApprovalDeclined:
			return gradeNotExercised, how + ": it declined, so a headless run cannot be driven to approve; the call was refused approval_declined"
		case approve && (len(granted) != 1 || granted[0].By != "harness"):
			return gradeFail, fmt.Sprintf("kernel recorded %s/%s with %d approval(s) granted by the harness", last.Status, last.Code, len(granted))
		case approve && (last.Status != kproto.StatusSucceeded || string(written) != askedContent):
			return gradeFail, fmt.Sprintf("approved, but the kernel recorded %s/%s and the file holds %q", last.Status, last.Code, written)
		case approve && (!answered || res.IsError):
			return gradeFail, "the approved write's result did not reach the model: " + clip(res.Text)
		case !approve && (len(declined) != 1 || declined[0].By != "harness" || last.Code != kproto.CodeApprovalDeclined):
			return gradeFail, fmt.Sprintf("kernel recorded %s/%s with %d decline(s) by the harness", last.Status, last.Code, len(declined))
		case !approve && len(written) > 0:
			return gradeFail, "declined, but the file was written"
		case !approve && !answered:
			return gradeFail, "the harness never returned the refusal to the model"
		}
		if !approve {
			if msg := h.refusalReported(res, kproto.CodeApprovalDeclined); msg != "" {
				return gradeFail, msg
			}
		}
		if err := e.finished(1); err != nil {
			return gradeFail, err.Error()
		}
		if approve {
			return gradePass, how + ", which approved; tool.approval.granted by harness was recorded before the write ran, and its result reached the model"
		}
		return gradePass, how + ", which declined; tool.approval.declined by harness was recorded, the call was refused approval_declined and the model saw the error"
	}
}

// gradeCancellation passes when the held call reached the kernel, the
// harness gave up on it and cancelled it (the kernel saw call.cancel for
// it before the turn's final answer, so not as the shim's clean-up when
// the harness exits), the model saw an error result and the turn ended.
func gradeCancellation(e *evidence, h *harness) (string, string) {
	res, answered := e.result(0)
	if len(e.held) == 0 {
		if answered {
			return gradeNotExercised, "the kernel never saw files.read " + heldPath + "; the harness answered the model itself: " + clip(res.Text)
		}
		return gradeNotExercised, "the kernel never saw files.read " + heldPath
	}
	if inv := e.invocations("files.read"); len(inv) > 0 {
		return gradeFail, fmt.Sprintf("the held call reached the reference kernel (%s/%s)", inv[0].Status, inv[0].Code)
	}
	call := e.held[0]
	if !answered {
		return gradeFail, "the harness never returned a result for the held call to the model"
	}
	if h.IsErrorFlag && !res.IsError {
		return gradeFail, "the timed-out call reached the model without is_error: " + clip(res.Text)
	}
	if !mentionsTimeout(res.Text) {
		return gradeFail, "the result the model saw does not say the call timed out or was cancelled: " + clip(res.Text)
	}
	final, ok := e.finalAt(1)
	switch {
	case call.CancelledAt.IsZero():
		return gradeFail, fmt.Sprintf("the harness gave up on the call (the model saw: %s) but never cancelled it: the kernel got no call.cancel for %s", clip(res.Text), call.CallID)
	case ok && call.CancelledAt.After(final):
		return gradeFail, fmt.Sprintf("call.cancel for %s came only after the final answer, when the turn ended, not when the harness gave up (the model saw: %s)", call.CallID, clip(res.Text))
	}
	if err := e.finished(1); err != nil {
		return gradeFail, err.Error()
	}
	return gradePass, fmt.Sprintf("the kernel saw call.cancel for %s %.1fs after the call; the model saw an error result (%s) and the turn ended with the final answer",
		call.CallID, call.CancelledAt.Sub(call.At).Seconds(), clip(res.Text))
}

// gradeKernelDown grades a harness started while no kernel runs, so
// serve exits at once with its error on stderr: pass when the harness
// refuses to start (exits non-zero without finishing a turn); "carries on
// without it" when it runs the turn without the kernel's tools. Either
// way the detail says whether serve's error, which names the socket,
// reached what the harness printed.
func gradeKernelDown(e *evidence, h *harness) (string, string) {
	if len(e.audit) > 0 {
		return gradeFail, "the kernel's audit log has records, but no kernel was started"
	}
	shown := "it printed nothing of serve's error"
	if i := strings.Index(e.output, e.sock); i >= 0 {
		line := e.output[strings.LastIndex(e.output[:i], "\n")+1:]
		line, _, _ = strings.Cut(line, "\n")
		shown = "it printed serve's error: " + clip(line)
	} else if line, ok := mentionsServer(e.output); ok {
		shown += ", only: " + clip(line)
	}
	ranTurn := strings.Contains(e.output, finalAnswer)
	switch {
	case offersManaged(e.offeredTools()):
		return gradeFail, "the kernel's tools were offered to the model although no kernel runs"
	case e.exitErr != nil && !ranTurn:
		return gradePass, "refused to start; " + shown
	case !ranTurn:
		return gradeFail, "exited 0 without running the turn; " + shown
	}
	exit := "exit 0"
	if e.exitErr != nil {
		exit = e.exitErr.Error()
	}
	return gradeCarriesOn, fmt.Sprintf("ran the turn to its final answer (%s) with none of the kernel's tools offered to the model; %s", exit, shown)
}

// mentionsServer returns the first line of a harness's output that is
// about its MCP servers; a JSON line is the harness's result document
// for a script (Claude Code's --output-format json), not words to a
// person, and is skipped, and so is the declared model's name, which
// also says "sharedos".
func mentionsServer(output string) (string, bool) {
	for line := range strings.SplitSeq(output, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "{") {
			continue
		}
		if l := strings.ToLower(strings.ReplaceAll(line, declaredModel, "")); strings.Contains(l, "mcp") || strings.Contains(l, "sharedos") {
			return strings.TrimSpace(line), true
		}
	}
	return "", false
}

// mentionsTimeout reports whether a result's text says the call timed out
// or was cancelled, in any of the harnesses' wordings.
func mentionsTimeout(text string) bool {
	t := strings.ToLower(text)
	for _, w := range []string{"timed out", "timeout", "time out", "cancel", "abort"} {
		if strings.Contains(t, w) {
			return true
		}
	}
	return false
}

func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}
