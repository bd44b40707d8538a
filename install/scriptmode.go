package install

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// pi-mcp-adapter's script mode registers an `mcpScript` tool that runs
// JavaScript the model writes in node:vm inside Pi's own process. node:vm
// is not a sandbox: such a script can reach Node's globals and do what Pi
// can do, outside the kernel, without a grant and without a record. The
// adapter turns it on unless `"settings": {"scriptMode": false}` is in one
// of its config files (pi-mcp-adapter 2.36.0: index.ts registers the tool
// when earlyConfig.settings?.scriptMode !== false). So `install pi` turns
// it off, and doctor reports it when it is on.

// Options are the choices install offers beyond the entry itself.
type Options struct {
	// KeepScriptMode leaves a harness's script mode as it is instead of
	// turning it off.
	KeepScriptMode bool
}

// ScriptModeEdit is what an install did about the harness's script mode.
type ScriptModeEdit int

const (
	// ScriptModeNone: the harness has no script mode.
	ScriptModeNone ScriptModeEdit = iota
	// ScriptModeTurnedOff: the install set settings.scriptMode to false.
	ScriptModeTurnedOff
	// ScriptModeAlreadyOff: the file already set it to false.
	ScriptModeAlreadyOff
	// ScriptModeKept: Options.KeepScriptMode left it as it was.
	ScriptModeKept
)

var scriptModePath = []string{"settings", "scriptMode"}

// HasScriptMode reports whether the harness can run model-written code
// outside its MCP servers, switched by settings.scriptMode.
func (h Harness) HasScriptMode() bool { return h.scriptMode }

// RenderInstall is what install writes: src with our entry set to e and,
// for a harness with a script mode, settings.scriptMode set to false
// unless opts keep it.
func (h Harness) RenderInstall(src []byte, e Entry, opts Options) ([]byte, ScriptModeEdit, error) {
	out, err := h.Render(src, e)
	if err != nil || !h.scriptMode {
		return out, ScriptModeNone, err
	}
	if opts.KeepScriptMode {
		return out, ScriptModeKept, nil
	}
	if v, _ := scriptModeValue(out); v == "false" {
		return out, ScriptModeAlreadyOff, nil
	}
	out, err = jsonSet(out, scriptModePath, false)
	if err != nil {
		return nil, ScriptModeNone, fmt.Errorf("set settings.scriptMode: %w", err)
	}
	return out, ScriptModeTurnedOff, nil
}

// ScriptModeOff reports whether src sets settings.scriptMode to false.
func (h Harness) ScriptModeOff(src []byte) bool {
	v, _ := scriptModeValue(src)
	return h.scriptMode && v == "false"
}

// scriptModeValue returns the JSON text of settings.scriptMode in src
// and whether the adapter would read it: a file that does not parse, or
// whose settings is not an object, is one the adapter skips whole.
func scriptModeValue(src []byte) (string, bool) {
	settings, err := jsonLookup(src, scriptModePath[:1])
	if err != nil {
		return "", false
	}
	if settings == nil {
		return "", true
	}
	if settings.kind != '{' {
		return "", false
	}
	j, ok := settings.member(scriptModePath[1])
	if !ok {
		return "", true
	}
	v := settings.members[j].val
	return string(src[v.start:v.end]), true
}

// ScriptModeState is whether a harness's script mode is on where it runs.
type ScriptModeState struct {
	On bool
	// File is the file whose settings.scriptMode decided; "" when none
	// sets it and the adapter's default (on) holds.
	File string
}

// ScriptMode reports whether the harness, started in env.Dir, runs with
// its script mode on. It reads the config files pi-mcp-adapter 2.36.0
// merges, in its order (a later file's setting wins): ~/.config/mcp/mcp.json,
// ~/.agents/mcp.json, ~/.agents/mcp/mcp.json, Pi's agent mcp.json
// ($PI_CODING_AGENT_DIR, else ~/.pi/agent), ./.mcp.json and ./.pi/mcp.json;
// with PI_MCP_CONFIG_MODE=exclusive only the agent file. Files it would
// skip (missing, unreadable, not JSON) decide nothing. Ancestor-directory
// discovery, which a user opts into, and a --mcp-config override are not
// followed. For a harness without a script mode it returns the zero state.
func (h Harness) ScriptMode(env Env) (ScriptModeState, error) {
	if !h.scriptMode {
		return ScriptModeState{}, nil
	}
	agent, err := piUserPath(env)
	if err != nil {
		return ScriptModeState{}, err
	}
	files := []string{agent}
	if !strings.EqualFold(strings.TrimSpace(env.getenv("PI_MCP_CONFIG_MODE")), "exclusive") {
		var global []string
		if env.Home != "" {
			global = []string{
				filepath.Join(env.Home, ".config", "mcp", "mcp.json"),
				filepath.Join(env.Home, ".agents", "mcp.json"),
				filepath.Join(env.Home, ".agents", "mcp", "mcp.json"),
			}
		}
		files = append(global, agent)
		if env.Dir != "" {
			files = append(files, filepath.Join(env.Dir, ".mcp.json"), filepath.Join(env.Dir, ".pi", "mcp.json"))
		}
	}
	st := ScriptModeState{On: true}
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f] {
			continue
		}
		seen[f] = true
		src, err := os.ReadFile(f)
		if err != nil || len(bytes.TrimSpace(src)) == 0 {
			if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, os.ErrPermission) {
				return ScriptModeState{}, fmt.Errorf("read %s: %w", f, err)
			}
			continue
		}
		if v, ok := scriptModeValue(src); ok && v != "" {
			st = ScriptModeState{On: v != "false", File: f}
		}
	}
	return st, nil
}

// piUserPath is Pi's agent mcp.json: $PI_CODING_AGENT_DIR/mcp.json (with
// ~ for the home directory, as Pi reads it), else ~/.pi/agent/mcp.json.
func piUserPath(e Env) (string, error) {
	if d := strings.TrimSpace(e.getenv("PI_CODING_AGENT_DIR")); d == "~" || strings.HasPrefix(d, "~/") {
		return homeJoin(e, strings.TrimPrefix(strings.TrimPrefix(d, "~"), "/"), "mcp.json")
	}
	return varOrHome("PI_CODING_AGENT_DIR", filepath.Join(".pi", "agent"), "mcp.json")(e)
}
