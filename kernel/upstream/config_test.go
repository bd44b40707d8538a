package upstream

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// document is how the kernel's loader embeds Config: decoded with unknown
// keys refused.
type document struct {
	Upstream []Config `toml:"upstream"`
}

func decode(t *testing.T, doc string) []Config {
	t.Helper()
	var d document
	if err := toml.NewDecoder(strings.NewReader(doc)).DisallowUnknownFields().Decode(&d); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return d.Upstream
}

func TestParseAppliesTheDefaults(t *testing.T) {
	cfgs := decode(t, `
[[upstream]]
name = "memory"
command = ["npx", "-y", "@modelcontextprotocol/server-memory"]
env = { MEMORY_FILE_PATH = "/tmp/m.jsonl" }

[[upstream.tool]]
name = "read_graph"
action = "read"
resource = "/graph"

[[upstream.tool]]
name = "create_entities"

[[upstream]]
name = "github"
command = ["gh-mcp"]
cwd = "work"
startup_timeout = "5s"
call_timeout = "2m"

[[upstream.tool]]
name = "get_repo"
action = "read"
resource = "/repos/{owner}/{repo}"
`)
	base := t.TempDir()
	specs, err := Parse(cfgs, base)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 {
		t.Fatalf("got %d specs", len(specs))
	}
	m, g := specs[0], specs[1]
	if m.Name != "memory" || m.StartupTimeout != DefaultStartupTimeout || m.CallTimeout != DefaultCallTimeout || m.Dir != base {
		t.Errorf("memory spec = %+v", m)
	}
	if m.Env["MEMORY_FILE_PATH"] != "/tmp/m.jsonl" || len(m.Env) != 1 {
		t.Errorf("memory env = %v", m.Env)
	}
	if ts := m.Tools["read_graph"]; ts.Action != "read" || ts.Resource.String() != "/graph" {
		t.Errorf("read_graph = %+v", ts)
	}
	if ts := m.Tools["create_entities"]; ts.Action != "call" || ts.Resource.String() != "/create_entities" {
		t.Errorf("create_entities took %+v, want the defaults", ts)
	}
	if ts, ok := m.Tool("delete_entities"); !ok || ts.Action != "call" || ts.Resource.String() != "/delete_entities" {
		t.Errorf("an unconfigured tool = %+v, %v; want the defaults", ts, ok)
	}
	if g.Dir != filepath.Join(base, "work") || g.StartupTimeout != 5*time.Second || g.CallTimeout != 2*time.Minute {
		t.Errorf("github spec = %+v", g)
	}
	if ts := g.Tools["get_repo"]; strings.Join(ts.Resource.Arguments(), ",") != "owner,repo" {
		t.Errorf("get_repo placeholders = %q", ts.Resource.Arguments())
	}
}

func TestParseRefuses(t *testing.T) {
	const head = "[[upstream]]\nname = \"a\"\ncommand = [\"x\"]\n"
	tests := []struct {
		name     string
		doc      string
		upstream int
		tool     int
		key      string
		is       error // when set, errors.Is must hold
		line     int   // what Locate must find
	}{
		{"an upstream named files", "[[upstream]]\nname = \"files\"\ncommand = [\"x\"]\n", 0, -1, "name", ErrReservedName, 2},
		{"an upstream named sharedos", head + "[[upstream]]\ncommand = [\"x\"]\nname = \"sharedos\"\n", 1, -1, "name", ErrReservedName, 6},
		{"two upstreams with one name", head + "[[upstream]]\nname = \"a\"\ncommand = [\"y\"]\n", 1, -1, "name", ErrDuplicateName, 5},
		{"a name that is not a namespace", "[[upstream]]\nname = \"My Server\"\ncommand = [\"x\"]\n", 0, -1, "name", ErrInvalidName, 2},
		{"a name with a colon", "[[upstream]]\nname = \"a:b\"\ncommand = [\"x\"]\n", 0, -1, "name", ErrInvalidName, 2},
		{"no name", "[[upstream]]\ncommand = [\"x\"]\n", 0, -1, "name", ErrInvalidName, 1},
		{"an empty command", "[[upstream]]\nname = \"a\"\ncommand = []\n", 0, -1, "command", ErrEmptyCommand, 3},
		{"neither command nor url", "[[upstream]]\nname = \"a\"\n", 0, -1, "", ErrNoTransport, 1},
		{"a command whose program is empty", "[[upstream]]\nname = \"a\"\ncommand = [\"\", \"x\"]\n", 0, -1, "command", ErrEmptyCommand, 3},
		{"an env name with '='", head + "env = { \"A=B\" = \"x\" }\n", 0, -1, "env", nil, 4},
		{"a bad startup timeout", head + "startup_timeout = \"soon\"\n", 0, -1, "startup_timeout", nil, 4},
		{"a zero call timeout", head + "call_timeout = \"0s\"\n", 0, -1, "call_timeout", nil, 4},
		{"a negative call timeout", head + "call_timeout = \"-1s\"\n", 0, -1, "call_timeout", nil, 4},
		{"a bad action", head + "[[upstream.tool]]\nname = \"t\"\n[[upstream.tool]]\nname = \"u\"\naction = \"delete\"\n", 0, 1, "action", ErrInvalidAction, 8},
		{"escalate is not a brokered action", head + "[[upstream.tool]]\nname = \"t\"\naction = \"escalate\"\n", 0, 0, "action", ErrInvalidAction, 6},
		{"a resource template with dot-dot", head + "[[upstream.tool]]\nname = \"t\"\nresource = \"/a/../b\"\n", 0, 0, "resource", nil, 6},
		{"a placeholder inside a segment", head + "[[upstream.tool]]\nname = \"t\"\nresource = \"/a/x{b}\"\n", 0, 0, "resource", nil, 6},
		{"a relative resource", head + "[[upstream.tool]]\nname = \"t\"\nresource = \"graph\"\n", 0, 0, "resource", nil, 6},
		{"a tool without a name", head + "[[upstream.tool]]\naction = \"read\"\n", 0, 0, "name", nil, 4},
		{"a tool configured twice", head + "[[upstream.tool]]\nname = \"t\"\n[[upstream.tool]]\nname = \"t\"\n", 0, 1, "name", nil, 7},
		{"a tool whose name cannot be the default resource", head + "[[upstream.tool]]\nname = \"..\"\n", 0, 0, "resource", nil, 4},
		{"the second upstream's tool, counted within it", head + "[[upstream.tool]]\nname = \"t\"\n[[upstream]]\nname = \"b\"\ncommand = [\"y\"]\n[[upstream.tool]]\nname = \"t\"\naction = \"run\"\n", 1, 0, "action", ErrInvalidAction, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(decode(t, tt.doc), "")
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Parse error = %v, want a *ConfigError", err)
			}
			if ce.Upstream != tt.upstream || ce.Tool != tt.tool || ce.Key != tt.key {
				t.Errorf("error at upstream %d tool %d key %q, want %d %d %q (%v)", ce.Upstream, ce.Tool, ce.Key, tt.upstream, tt.tool, tt.key, err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			line, _, ok := Locate([]byte(tt.doc), ce)
			if !ok || line != tt.line {
				t.Errorf("Locate = line %d, %v; want %d", line, ok, tt.line)
			}
		})
	}
}

func TestConfigErrorNamesTheTableAndKey(t *testing.T) {
	err := &ConfigError{Upstream: 1, Tool: 2, Key: "action", Err: ErrInvalidAction}
	if got := err.Error(); !strings.HasPrefix(got, "upstream #2 tool #3 action: ") {
		t.Errorf("Error() = %q", got)
	}
	err = &ConfigError{Upstream: 0, Tool: -1, Key: "name", Err: ErrReservedName}
	if got := err.Error(); !strings.HasPrefix(got, "upstream #1 name: ") {
		t.Errorf("Error() = %q", got)
	}
}

func TestLocateFallsBackToTheHeaderOrGivesUp(t *testing.T) {
	doc := []byte("# upstreams\n\n[[upstream]]\nname = \"a\"\n")
	if line, col, ok := Locate(doc, &ConfigError{Upstream: 0, Tool: -1, Key: "command"}); !ok || line != 3 || col != 3 {
		t.Errorf("a missing key: line %d col %d ok %v, want the header at 3:3", line, col, ok)
	}
	inline := []byte("upstream = [{ name = \"files\", command = [\"x\"] }]\n")
	if _, _, ok := Locate(inline, &ConfigError{Upstream: 0, Tool: -1, Key: "name"}); ok {
		t.Error("located a key of an inline table")
	}
	if _, _, ok := Locate(doc, &ConfigError{Upstream: 3, Tool: -1, Key: "name"}); ok {
		t.Error("located an upstream the document does not have")
	}
}

func TestDecodeRefusesUnknownKeys(t *testing.T) {
	var d document
	err := toml.NewDecoder(bytes.NewReader([]byte("[[upstream]]\nname = \"a\"\ncomand = [\"x\"]\n"))).DisallowUnknownFields().Decode(&d)
	if err == nil {
		t.Fatal("a misspelt key was accepted")
	}
}
