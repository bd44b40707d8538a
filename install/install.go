// Package install renders the sharedos server entry into each harness's
// own MCP configuration file and removes it again.
//
// Every format is edited in place, not regenerated: the user's keys, key
// order, comments and formatting outside our entry are kept byte for byte,
// so that install followed by uninstall gives back the file as it was. The
// edit is pure ([Harness.Render], [Harness.Remove]); [PlanInstall],
// [PlanUninstall] and [Change.Apply] do the file I/O around it.
package install

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sharedos/sharedos-mcp/internal/nearest"
)

// ServerName is the name every harness knows the server by: the entry
// that announces the harness's own integration. A subagent's entry, one
// that announces another (a child integration), is named by EntryName.
const ServerName = "sharedos"

// EntryName is the name of the entry that announces integration in
// harness h: ServerName for the harness's own id, and "sharedos-NAME" for
// any other, a further entry a subagent or profile is given alone, with
// each character of NAME other than an ASCII letter, digit, '-' or '_'
// written '_' (harnesses build tool names from it, and allow no more):
// "sharedos-claude-code_explorer" for claude-code.explorer.
func EntryName(h Harness, integration string) string {
	if integration == h.ID {
		return ServerName
	}
	return ServerName + "-" + replaceOutside(integration, "-_", false)
}

// isOurs reports whether name is the name of one of our entries:
// ServerName or a further one EntryName makes.
func isOurs(name string) bool {
	rest, ok := strings.CutPrefix(name, ServerName)
	return ok && (rest == "" || strings.HasPrefix(rest, "-") && len(rest) > 1)
}

// Timeouts written into the harness configs that have them. The startup
// budget covers dialing the kernel and fetching the catalogue; a tool call
// may wait on a human approving it at the kernel, so it gets minutes.
const (
	StartupTimeoutSec = 20
	ToolTimeoutSec    = 300
)

// Scope says which of a harness's two config files is edited.
type Scope string

// The scopes.
const (
	ScopeUser    Scope = "user"
	ScopeProject Scope = "project"
)

// ParseScope checks a --scope value.
func ParseScope(s string) (Scope, bool) {
	switch Scope(s) {
	case ScopeUser, ScopeProject:
		return Scope(s), true
	}
	return "", false
}

// Env is what locating a config file reads from the process. Tests fill it
// with a temporary home and their own variables.
type Env struct {
	Home   string              // the user's home directory (os.UserHomeDir)
	Dir    string              // the project directory, for ScopeProject and relative variables
	Getenv func(string) string // nil reads as "no variable set"
	GOOS   string              // "" means runtime.GOOS
}

func (e Env) getenv(k string) string {
	if e.Getenv == nil {
		return ""
	}
	return e.Getenv(k)
}

// dirVar returns the directory named by variable k, made absolute against
// e.Dir, or "" when k is unset.
func (e Env) dirVar(k string) string {
	v := e.getenv(k)
	if v == "" {
		return ""
	}
	if !filepath.IsAbs(v) {
		v = filepath.Join(e.Dir, v)
	}
	return v
}

func (e Env) goos() string {
	if e.GOOS == "" {
		return runtime.GOOS
	}
	return e.GOOS
}

// Entry is the command a harness runs to start the server.
type Entry struct {
	Command string   // absolute path of this binary
	Args    []string // serve --integration NAME [--socket PATH]
}

// NewEntry returns the entry that runs command as `serve` for integration,
// with --socket only when socket is not empty.
func NewEntry(command, integration, socket string) Entry {
	args := []string{"serve", "--integration", integration}
	if socket != "" {
		args = append(args, "--socket", socket)
	}
	return Entry{Command: command, Args: args}
}

// Flag returns the value of the serve flag name (without dashes) in the
// entry's arguments, in any of the spellings Go's flag package takes
// (-name v, --name v, -name=v, --name=v), and whether it is there.
func (e Entry) Flag(name string) (string, bool) {
	for i := 0; i < len(e.Args); i++ {
		a := e.Args[i]
		if a == "--" {
			break
		}
		bare := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if bare == a {
			continue
		}
		if k, v, ok := strings.Cut(bare, "="); ok && k == name {
			return v, true
		}
		if bare == name && i+1 < len(e.Args) {
			return e.Args[i+1], true
		}
	}
	return "", false
}

// check refuses what no format can carry faithfully.
func (e Entry) check() error {
	if e.Command == "" {
		return errors.New("entry has no command")
	}
	for _, s := range append([]string{e.Command}, e.Args...) {
		if !utf8.ValidString(s) {
			return fmt.Errorf("entry argument %q is not valid UTF-8", s)
		}
	}
	return nil
}

// Harness is one harness this package can configure.
type Harness struct {
	ID     string // what the CLI takes: "claude-code", "codex", …
	Title  string // what people call it
	Verify string // a command that shows the server is connected
	// ProjectVerify, when set, replaces Verify for a project's file: a
	// harness that reads that file only when told to.
	ProjectVerify string

	// aka are other names people call it by, for suggestions.
	aka         []string
	userPath    func(Env) (string, error)
	projectPath string // relative to Env.Dir
	format      format
	// scriptMode: the harness can run model-written code outside any
	// MCP server, switched by settings.scriptMode (see scriptmode.go).
	scriptMode bool
	// createdNote, for a format with comments, is the line install puts
	// first in a file it creates, so that uninstall can tell that file
	// from one the user made: it removes the file when nothing else is
	// left in it.
	createdNote string
	// entry is the name of the entry Render, Remove and Find edit: ""
	// is ServerName (see Named).
	entry string
}

// VerifyAt is the command that shows the server connected from the file
// of scope.
func (h Harness) VerifyAt(scope Scope) string {
	if scope == ScopeProject && h.ProjectVerify != "" {
		return h.ProjectVerify
	}
	return h.Verify
}

// format is one config file syntax and where our entry lives in it.
// Each method acts on the entry named name.
type format interface {
	merge(src []byte, name string, e Entry) ([]byte, error)
	remove(src []byte, name string) ([]byte, error)
	inspect(src []byte, name string) (found bool, e Entry, err error)
	// names lists the names of our entries in src (ServerName and the
	// further ones), in the file's order.
	names(src []byte) ([]string, error)
}

// Named returns the harness with its entry named name (EntryName): its
// Render, Remove and Find edit that entry, every other one left as it is.
func (h Harness) Named(name string) Harness {
	h.entry = name
	return h
}

// EntryName is the name of the entry h edits.
func (h Harness) EntryName() string {
	if h.entry == "" {
		return ServerName
	}
	return h.entry
}

func homeFile(parts ...string) func(Env) (string, error) {
	return func(e Env) (string, error) {
		return homeJoin(e, parts...)
	}
}

func homeJoin(e Env, parts ...string) (string, error) {
	if e.Home == "" {
		return "", errors.New("no home directory")
	}
	return filepath.Join(append([]string{e.Home}, parts...)...), nil
}

// varOrHome is $variable/name when the variable is set, else
// ~/dotdir/name.
func varOrHome(variable, dotdir, name string) func(Env) (string, error) {
	return func(e Env) (string, error) {
		if d := e.dirVar(variable); d != "" {
			return filepath.Join(d, name), nil
		}
		return homeJoin(e, dotdir, name)
	}
}

// xdgConfig is $XDG_CONFIG_HOME/parts… or ~/.config/parts….
func xdgConfig(e Env, parts ...string) (string, error) {
	if d := e.dirVar("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(append([]string{d}, parts...)...), nil
	}
	return homeJoin(e, append([]string{".config"}, parts...)...)
}

func vscodeUser(e Env) (string, error) {
	switch e.goos() {
	case "darwin":
		return homeJoin(e, "Library", "Application Support", "Code", "User", "mcp.json")
	case "linux":
		return xdgConfig(e, "Code", "User", "mcp.json")
	}
	return "", fmt.Errorf("no known VS Code user settings folder on %s", e.goos())
}

// stdioEntry is the {"type":"stdio","command","args"} shape Cursor and VS
// Code share; Claude Code adds "env".
func stdioEntry(withEnv bool) func(Entry) obj {
	return func(e Entry) obj {
		o := obj{{"type", "stdio"}, {"command", e.Command}, {"args", e.Args}}
		if withEnv {
			o = append(o, field{"env", obj{}})
		}
		return o
	}
}

var harnesses = []Harness{
	{
		ID: "claude-code", Title: "Claude Code", Verify: "claude mcp list", aka: []string{"claude"},
		userPath: homeFile(".claude.json"), projectPath: ".mcp.json",
		format: jsonFormat{container: []string{"mcpServers"}, entry: stdioEntry(true)},
	},
	{
		ID: "codex", Title: "Codex", Verify: "codex mcp list",
		userPath: varOrHome("CODEX_HOME", ".codex", "config.toml"), projectPath: filepath.Join(".codex", "config.toml"),
		format:      codexFormat{},
		createdNote: "# Created by 'sharedos-mcp install codex'; 'sharedos-mcp uninstall codex' removes this file while nothing else is in it.\n",
	},
	{
		ID: "gemini", Title: "Gemini CLI", Verify: "gemini mcp list", aka: []string{"gemini-cli"},
		userPath: homeFile(".gemini", "settings.json"), projectPath: filepath.Join(".gemini", "settings.json"),
		format: jsonFormat{container: []string{"mcpServers"}, entry: func(e Entry) obj {
			return obj{{"command", e.Command}, {"args", e.Args}, {"timeout", ToolTimeoutSec * 1000}}
		}},
	},
	{
		ID: "pi", Title: "Pi (pi-mcp-adapter)", Verify: "pi, then /mcp", aka: []string{"pi-mcp-adapter", "pi-coding-agent"},
		userPath: piUserPath, projectPath: filepath.Join(".pi", "mcp.json"), scriptMode: true,
		format: jsonFormat{container: []string{"mcpServers"}, entry: func(e Entry) obj {
			return obj{{"command", e.Command}, {"args", e.Args}, {"lifecycle", "eager"}, {"requestTimeoutMs", ToolTimeoutSec * 1000}}
		}},
	},
	{
		ID: "deepseek", Title: "DeepSeek Harness", Verify: "dsh, then /mcp", aka: []string{"dsh"},
		// dsh 0.1.0-rc.8 has no project layer: it reads a project's patch
		// only when given it.
		ProjectVerify: "dsh --patch .dsh/cordis.patch.yml, then /mcp (dsh reads a project's file only when --patch names it)",
		userPath:      varOrHome("DSH_HOME", ".dsh", "cordis.patch.yml"), projectPath: filepath.Join(".dsh", "cordis.patch.yml"),
		format: deepseekFormat{},
	},
	{
		ID: "cursor", Title: "Cursor", Verify: "cursor-agent mcp list", aka: []string{"cursor-agent"},
		userPath: homeFile(".cursor", "mcp.json"), projectPath: filepath.Join(".cursor", "mcp.json"),
		format: jsonFormat{container: []string{"mcpServers"}, entry: stdioEntry(false)},
	},
	{
		ID: "vscode", Title: "VS Code", Verify: "'MCP: List Servers' in the command palette", aka: []string{"code", "visual-studio-code"},
		userPath: vscodeUser, projectPath: filepath.Join(".vscode", "mcp.json"),
		format: jsonFormat{container: []string{"servers"}, entry: stdioEntry(false)},
	},
	{
		ID: "opencode", Title: "opencode", Verify: "opencode mcp list",
		userPath: func(e Env) (string, error) { return xdgConfig(e, "opencode", "opencode.json") }, projectPath: "opencode.json",
		format: jsonFormat{container: []string{"mcp"}, commandArray: true, entry: func(e Entry) obj {
			return obj{{"type", "local"}, {"command", append([]string{e.Command}, e.Args...)}, {"enabled", true}}
		}},
	},
}

// Harnesses returns the ids of every harness, in the order help lists them.
func Harnesses() []string {
	ids := make([]string, len(harnesses))
	for i, h := range harnesses {
		ids[i] = h.ID
	}
	return ids
}

// Lookup returns the harness with that id.
func Lookup(id string) (Harness, bool) {
	i := slices.IndexFunc(harnesses, func(h Harness) bool { return h.ID == id })
	if i < 0 {
		return Harness{}, false
	}
	return harnesses[i], true
}

// UnknownHarnessError is an id Lookup does not know. Suggestion is the
// harness it most likely means, "" when none is close; Unsupported is the
// name of a known MCP client install does not configure, which the id
// names (then there is no Suggestion).
type UnknownHarnessError struct{ ID, Suggestion, Unsupported string }

func (e *UnknownHarnessError) Error() string {
	if e.Unsupported != "" {
		return fmt.Sprintf("%s (%s) is not supported", e.Unsupported, e.ID)
	}
	return fmt.Sprintf("unknown harness %q", e.ID)
}

// unsupported are MCP clients people ask install for that it does not
// configure, by name, with the ids people try for them (compared without
// case or separators): their ids are closer to a supported harness's
// (claude-desktop to claude-code) than their meaning is.
var unsupported = []struct {
	name string
	ids  []string
}{
	{"Claude Desktop", []string{"claudedesktop", "claudeapp"}},
}

// bareID is an id without case or separators.
func bareID(id string) string {
	return strings.ToLower(strings.NewReplacer("-", "", "_", "", " ", "", ".", "").Replace(id))
}

// LookupOrSuggest is Lookup that explains a miss: the error is an
// *UnknownHarnessError naming the nearest harness (claude for
// claude-code, gemini-cli for gemini), or saying that a known client is
// not supported.
func LookupOrSuggest(id string) (Harness, error) {
	if h, ok := Lookup(id); ok {
		return h, nil
	}
	for _, u := range unsupported {
		if slices.Contains(u.ids, bareID(id)) {
			return Harness{}, &UnknownHarnessError{ID: id, Unsupported: u.name}
		}
	}
	cs := make([]nearest.Candidate, len(harnesses))
	for i, h := range harnesses {
		cs[i] = nearest.Candidate{Name: h.ID, Other: append([]string{h.Title}, h.aka...)}
	}
	return Harness{}, &UnknownHarnessError{ID: id, Suggestion: nearest.Find(id, cs)}
}

// Path returns the file the harness reads for scope.
func (h Harness) Path(scope Scope, env Env) (string, error) {
	switch scope {
	case ScopeUser:
		p, err := h.userPath(env)
		if err != nil {
			return "", fmt.Errorf("locate %s user config: %w", h.Title, err)
		}
		return p, nil
	case ScopeProject:
		if env.Dir == "" {
			return "", fmt.Errorf("locate %s project config: no project directory", h.Title)
		}
		return filepath.Join(env.Dir, h.projectPath), nil
	}
	return "", fmt.Errorf("unknown scope %q", scope)
}

// Render returns src with our entry set to e, everything else unchanged.
// A nil or blank src is a file that does not exist yet. A src that does
// not parse is refused with a *ParseError.
func (h Harness) Render(src []byte, e Entry) ([]byte, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return h.format.merge(src, h.EntryName(), e)
}

// Remove returns src without our entry; src itself when there is none.
func (h Harness) Remove(src []byte) ([]byte, error) {
	return h.format.remove(src, h.EntryName())
}

// Find reports whether src holds our entry and what it runs. An entry
// without a command has an empty Command.
func (h Harness) Find(src []byte) (found bool, e Entry, err error) {
	return h.format.inspect(src, h.EntryName())
}

// ParseError is a config file that does not parse. Line and Column are
// 1-based; 0 when the parser did not say.
type ParseError struct {
	Line, Column int
	Msg          string
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	if e.Column == 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

// position returns the 1-based line and column (in characters) of offset
// in src.
func position(src []byte, offset int) (line, col int) {
	offset = min(offset, len(src))
	before := src[:offset]
	line = 1 + strings.Count(string(before), "\n")
	lineStart := strings.LastIndexByte(string(before), '\n') + 1
	return line, 1 + utf8.RuneCount(before[lineStart:])
}

// ErrUnsupportedLayout is a file that parses but defines our entry in a
// way the textual edit cannot follow (an inline table, a flow sequence).
var ErrUnsupportedLayout = errors.New("unsupported layout")
