package doctor

import "github.com/sharedos/sharedos-mcp/install"

// withoutKernel says what each harness does when it starts while no
// kernel runs (serve exits at once with its error on stderr), after
// "with no kernel running, ": whether it refuses to start or carries on
// without the sharedos tools, what a person sees and where the reason
// is. It is what the kernel-down row of conformance/RESULTS.md recorded,
// or, for opencode, which has no column there, what 1.18.33 did when
// started by hand. A harness missing here was not checked.
var withoutKernel = map[string]string{
	"claude-code": "Claude Code carries on without the sharedos tools: 'claude -p' exits 0 and the model is told \"No such tool available\"; " +
		"the reason is only in its MCP log, ~/.cache/claude-cli-nodejs/<project directory, / as ->/mcp-logs-sharedos/ ($XDG_CACHE_HOME for ~/.cache when set)",
	"codex":    "Codex refuses to start (\"required MCP servers failed to initialize: sharedos\"), as the entry has required = true",
	"gemini":   "Gemini CLI carries on without the sharedos tools and prints only \"MCP issues detected\"; 'gemini mcp list' shows the server disconnected",
	"pi":       "Pi carries on without the sharedos tools; pi-mcp-adapter prints serve's error, Pi's built-in MCP support prints nothing in print mode",
	"opencode": "opencode carries on without the sharedos tools; its log (~/.local/share/opencode/log/) says \"server unavailable\" and 'opencode mcp list' shows the server failed",
	"deepseek": "DeepSeek Harness refuses to start and prints serve's error, as the entry has failOnStartupError: true",
}

// startsWithoutKernel notes, for an installed entry, whether its harness
// refuses to start or carries on when no kernel runs: one that carries on
// looks as if it works, without the sharedos tools.
func (d *doctor) startsWithoutKernel(label string, h install.Harness) {
	how, ok := withoutKernel[h.ID]
	if !ok {
		how = "not checked: whether " + h.Title + " refuses to start or carries on without the sharedos tools"
	}
	d.note("%s with no kernel running, %s", label, how)
}
