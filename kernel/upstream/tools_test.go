package upstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/policy"
)

func mustSpec(t *testing.T, doc string) Spec {
	t.Helper()
	specs, err := Parse(decode(t, doc), "")
	if err != nil {
		t.Fatal(err)
	}
	return specs[0]
}

func tool(name, description string, props map[string]any) *mcp.Tool {
	schema := map[string]any{"type": "object"}
	if props != nil {
		schema["properties"] = props
	}
	return &mcp.Tool{Name: name, Description: description, InputSchema: schema}
}

func TestJudgeSaysWhyEachToolIsNotPublished(t *testing.T) {
	spec := mustSpec(t, `
[[upstream]]
name = "gh"
command = ["x"]
[[upstream.tool]]
name = "get_repo"
action = "read"
resource = "/repos/{owner}/{repo}"
[[upstream.tool]]
name = "get_issue"
resource = "/issues/{n}"
[[upstream.tool]]
name = "search"
action = "search"
resource = "/search/{query}"
[[upstream.tool]]
name = "by_flag"
resource = "/{flag}"
[[upstream.tool]]
name = "missing"
`)
	str := map[string]any{"type": "string"}
	tools := []*mcp.Tool{
		tool("get_repo", "Get a repository.", map[string]any{"owner": str, "repo": str}),
		tool("get_issue", "Get an issue.", map[string]any{"n": map[string]any{"type": "integer"}}),
		tool("search", "Search.", map[string]any{"q": str}),
		tool("by_flag", "By flag.", map[string]any{"flag": map[string]any{"type": "boolean"}}),
		tool("has space", "A bad name.", nil),
		tool(strings.Repeat("a", 126), "A name too long once prefixed.", nil),
		tool("undescribed", "", nil),
		tool("twice", "One.", nil),
		tool("twice", "Two.", nil),
		tool("..", "A name that is no segment.", nil),
		tool("plain", "Default action and resource.", nil),
	}
	got := map[string]string{}
	var published []*Tool
	for _, l := range judge(&spec, tools) {
		if l.tool != nil {
			published = append(published, l.tool)
			continue
		}
		got[l.withheld.Tool] = l.withheld.Reason
		if l.withheld.Detail == "" || l.withheld.Upstream != "gh" {
			t.Errorf("withheld %+v says too little", l.withheld)
		}
	}
	want := map[string]string{
		"search":                 ReasonBadPlaceholder,
		"by_flag":                ReasonBadPlaceholder,
		"has space":              ReasonInvalidName,
		strings.Repeat("a", 126): ReasonInvalidName,
		"undescribed":            ReasonInvalidDefinition,
		"twice":                  ReasonInvalidDefinition,
		"..":                     ReasonBadResource,
		"missing":                ReasonNotOffered,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("withheld:\n got %v\nwant %v", got, want)
	}
	var names []string
	for _, p := range published {
		names = append(names, p.Name)
	}
	if !reflect.DeepEqual(names, []string{"gh.get_repo", "gh.get_issue", "gh.plain"}) {
		t.Fatalf("published %q", names)
	}
	repo, plain := published[0], published[2]
	if repo.Action != "read" || repo.ReadWrite() != "read" || repo.Resource.String() != "/repos/{owner}/{repo}" || repo.UpstreamTool != "get_repo" {
		t.Errorf("get_repo = %+v", repo)
	}
	if plain.Action != "call" || plain.ReadWrite() != "write" || plain.Resource.String() != "/plain" {
		t.Errorf("plain = %+v", plain)
	}
}

func TestJudgeLeavesOutToolsBeyondTheLimit(t *testing.T) {
	spec := mustSpec(t, "[[upstream]]\nname = \"many\"\ncommand = [\"x\"]\n")
	var tools []*mcp.Tool
	for i := range MaxToolsPerUpstream + 2 {
		tools = append(tools, tool(fmt.Sprintf("t%d", i), "A tool.", nil))
	}
	n, over := 0, 0
	for _, l := range judge(&spec, tools) {
		if l.tool != nil {
			n++
		} else if l.withheld.Reason == ReasonTooMany {
			over++
		}
	}
	if n != MaxToolsPerUpstream || over != 2 {
		t.Errorf("%d published, %d left out; want %d and 2", n, over, MaxToolsPerUpstream)
	}
}

func TestDefinitionIsWhatTheKernelPublishes(t *testing.T) {
	spec := mustSpec(t, "[[upstream]]\nname = \"memory\"\ncommand = [\"x\"]\n[[upstream.tool]]\nname = \"read_graph\"\naction = \"read\"\nresource = \"/graph\"\n")
	destructive := true
	mt := tool("read_graph", "Read the graph.", nil)
	mt.OutputSchema = map[string]any{"type": "object"}
	mt.Annotations = &mcp.ToolAnnotations{DestructiveHint: &destructive, OpenWorldHint: &destructive, Title: "ignored"}
	l := judge(&spec, []*mcp.Tool{mt})[0]
	if l.tool == nil {
		t.Fatalf("withheld: %+v", l.withheld)
	}
	d := l.tool.Definition()
	if d.Name != "memory.read_graph" || d.Namespace != "memory" || d.Source != "upstream:memory" || d.ReadWrite != "read" {
		t.Errorf("definition %+v", d)
	}
	pub, err := hashing.Project([]hashing.Definition{d})
	if err != nil {
		t.Fatal(err)
	}
	// The upstream's hints are published as stated (readOnlyHint false:
	// the upstream did not claim it), whatever the configured action.
	p := pub[0]
	if p.ReadOnlyHint || p.DestructiveHint == nil || !*p.DestructiveHint || p.IdempotentHint == nil || *p.IdempotentHint {
		t.Errorf("published hints readOnly %v destructive %v idempotent %v", p.ReadOnlyHint, p.DestructiveHint, p.IdempotentHint)
	}
	if string(p.OutputSchema) != `{"type":"object"}` {
		t.Errorf("outputSchema %s", p.OutputSchema)
	}
}

func TestResolveAndForwardedArguments(t *testing.T) {
	repos, err := policy.ParseTemplate("/repos/{owner}/{repo}")
	if err != nil {
		t.Fatal(err)
	}
	issues, err := policy.ParseTemplate("/issues/{n}")
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := policy.ParseTemplate("/graph")
	if err != nil {
		t.Fatal(err)
	}
	gh := &Tool{Name: "gh.get_repo", Upstream: "gh", Resource: repos}
	iss := &Tool{Name: "gh.get_issue", Upstream: "gh", Resource: issues}
	graph := &Tool{Name: "memory.read_graph", Upstream: "memory", Resource: fixed}
	tests := []struct {
		name     string
		tool     *Tool
		args     string
		resource string // "" means refused
		forward  string
	}{
		{"strings fill the segments", gh, `{"owner":"acme","repo":"w","extra":[1, 2]}`, "gh:/repos/acme/w", `{"owner":"acme","repo":"w","extra":[1,2]}`},
		{"an integer fills its segment and is sent as written", iss, `{"n": 42}`, "gh:/issues/42", `{"n":42}`},
		{"an integral float is sent as the integer it names", iss, `{"n":42.0}`, "gh:/issues/42", `{"n":42}`},
		{"an escaped string is sent as it decodes", gh, `{"owner":"\u0061cme","repo":"w"}`, "gh:/repos/acme/w", `{"owner":"acme","repo":"w"}`},
		{"a lone surrogate is sent as the replacement authorized", gh, `{"owner":"a\ud800","repo":"w"}`, "gh:/repos/a\uFFFD/w", `{"owner":"a` + "\uFFFD" + `","repo":"w"}`},
		{"a fixed resource forwards the arguments as read", graph, ` {"a": 1, "b": ["\u0041", "\ud800"]} `, "memory:/graph", `{"a":1,"b":["A","` + "\uFFFD" + `"]}`},
		{"no arguments are an empty object", graph, ``, "memory:/graph", `{}`},
		{"null arguments are an empty object", graph, `null`, "memory:/graph", `{}`},
		{"dot-dot", gh, `{"owner":"..","repo":"w"}`, "", ""},
		{"a duplicate key", gh, `{"owner":"..","owner":"acme","repo":"w"}`, "", ""},
		{"a duplicate key in a fixed resource's arguments", graph, `{"a":1,"a":2}`, "", ""},
		{"a slash", gh, `{"owner":"acme/w","repo":"x"}`, "", ""},
		{"empty", gh, `{"owner":"","repo":"x"}`, "", ""},
		{"NUL", gh, `{"owner":"a\u0000","repo":"x"}`, "", ""},
		{"missing", gh, `{"repo":"x"}`, "", ""},
		{"an object", gh, `{"owner":{},"repo":"x"}`, "", ""},
		{"a fraction", iss, `{"n":1.5}`, "", ""},
		{"an array of arguments", gh, `["acme","w"]`, "", ""},
		{"a fixed resource with arguments that are not an object", graph, `"x"`, "", ""},
		{"a fixed resource with invalid JSON", graph, `{"a":`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, fwd, err := tt.tool.Resolve(json.RawMessage(tt.args))
			if tt.resource == "" {
				if !errors.Is(err, ErrInvalidArguments) {
					t.Fatalf("Resolve = %v, %s, %v; want ErrInvalidArguments", r, fwd.Bytes(), err)
				}
				return
			}
			if err != nil || r.String() != tt.resource {
				t.Fatalf("Resolve = %v, %v; want %s", r, err, tt.resource)
			}
			if string(fwd.Bytes()) != tt.forward {
				t.Errorf("forwarded %s; want %s", fwd.Bytes(), tt.forward)
			}
		})
	}
}

func TestEnvironIsOnlyPathHomeAndTheConfiguredVariables(t *testing.T) {
	kernelEnv := map[string]string{"PATH": "/bin", "HOME": "/home/k", "AWS_SECRET_ACCESS_KEY": "s", "SHAREDOS_SOCKET": "/s"}
	lookup := func(k string) (string, bool) { v, ok := kernelEnv[k]; return v, ok }
	got := environ(map[string]string{"TOKEN": "t", "HOME": "/home/u"}, lookup)
	want := []string{"HOME=/home/u", "PATH=/bin", "TOKEN=t"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("environ = %q, want %q", got, want)
	}
	delete(kernelEnv, "HOME")
	if got := environ(nil, lookup); !reflect.DeepEqual(got, []string{"PATH=/bin"}) {
		t.Errorf("without HOME: %q", got)
	}
}
