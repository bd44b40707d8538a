package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

func TestParseConfigRefuses(t *testing.T) {
	const grantHead = "[[grant]]\nsubject = \"integration:*\"\n"
	tests := []struct {
		name string
		doc  string
		want []string // substrings of the error
	}{
		{"an unknown top-level key, by name and line", "socket = \"/s\"\n\nsokcet = \"/t\"\n", []string{"c.toml:3:1", `unknown key "sokcet"`}},
		{"an unknown key inside a grant", grantHead + "resource = \"files:/\"\nactions = [\"read\"]\ndescendant = true\n", []string{"c.toml:5:1", `unknown key "grant.descendant"`}},
		{"every unknown key, not just the first", "a = 1\nb = 2\n", []string{`"a"`, `"b"`, "c.toml:2:1"}},
		{"a syntax error with line and column", "[files]\nroot = = \"x\"\n", []string{"c.toml:2:"}},
		{"a value of the wrong type", grantHead + "resource = \"files:/\"\nactions = \"read\"\n", []string{"c.toml:4:", "actions"}},
		{"a subject without its kind", "[[grant]]\nsubject = \"claude-code\"\nresource = \"files:/\"\nactions = [\"read\"]\n", []string{"grant #1", "subject"}},
		{"a resource without a namespace", grantHead + "resource = \"/public\"\nactions = [\"read\"]\n", []string{"grant #1", "namespace:/path"}},
		{"a resource path that is not clean", grantHead + "resource = \"files:/a/../b\"\nactions = [\"read\"]\n", []string{"not clean"}},
		{"an unknown action", grantHead + "resource = \"files:/\"\nactions = [\"read\", \"delete\"]\n", []string{`"delete"`}},
		{"a grant without actions", grantHead + "resource = \"files:/\"\n", []string{"at least one action"}},
		{"an expiry without an offset", grantHead + "resource = \"files:/\"\nactions = [\"read\"]\nexpires = 2027-01-01T00:00:00\n", []string{"offset"}},
		{"an empty allow_uids", "allow_uids = []\n", []string{"allow_uids is empty"}},
		{"an empty operator_uids", "operator_uids = []\n", []string{"operator_uids is empty"}},
		{"an ask_timeout that is no duration", "ask_timeout = \"a minute\"\n", []string{`c.toml: ask_timeout "a minute": want a positive Go duration of at most 10m0s`}},
		{"an ask_timeout too long to hold a call", "ask_timeout = \"1h\"\n", []string{`ask_timeout "1h"`, "below serve's --call-timeout"}},
		{"a misspelt key, with what it means", grantHead + "resource = \"files:/\"\nactions = [\"read\"]\nask_tll = \"1m\"\n", []string{"c.toml:5:1", `unknown key "grant.ask_tll" (did you mean ask_ttl?)`}},
		{"an ask no one can answer", grantHead + "resource = \"files:/\"\nactions = [\"read\"]\nask = \"boss\"\n", []string{"c.toml:1: grant #1", `ask "boss": want "harness"`}},
		{"an ask_ttl without ask", grantHead + "resource = \"files:/\"\nactions = [\"read\"]\nask_ttl = \"5m\"\n", []string{"c.toml:1: grant #1", "ask_ttl \"5m\" is set but ask is not"}},
		{"an ask_ttl that is no duration", grantHead + "resource = \"files:/\"\nactions = [\"read\"]\nask = \"harness\"\nask_ttl = \"soon\"\n", []string{"c.toml:1: grant #1", `ask_ttl "soon": want a positive Go duration`}},
		{"a limit without a window", grantHead + "resource = \"files:/\"\nactions = [\"read\"]\nlimit = \"100\"\n", []string{"c.toml:1: grant #1", `limit "100": want COUNT/WINDOW`}},
		{"a limit in weeks", grantHead + "resource = \"files:/\"\nactions = [\"read\"]\nlimit = \"100/1w\"\n", []string{"c.toml:1: grant #1", "windows: s, m, h, d"}},
		{"a turn_limit of zero", grantHead + "resource = \"files:/\"\nactions = [\"read\"]\nturn_limit = 0\n", []string{"c.toml:1: grant #1", "turn_limit 0: want a whole number from 1"}},
		{"a limit of the wrong type", grantHead + "resource = \"files:/\"\nactions = [\"read\"]\nlimit = 100\n", []string{"c.toml:5:", "grant.limit: want a string COUNT/WINDOW"}},
		{"a parent nobody knows, with what it likely means", grantHead + "resource = \"files:/\"\nactions = [\"read\"]\n[[grant]]\nsubject = \"integration:claude-code\"\nresource = \"files:/\"\nactions = [\"read\"]\n\n[[integration]]\nname = \"claude-code.explorer\"\nparent = \"claude-cod\"\n",
			[]string{`c.toml:10: integration "claude-code.explorer": parent "claude-cod" is neither an [[integration]] nor the subject of any grant`, `did you mean parent = "claude-code"?`}},
		{"a cycle, by the line of its first declaration", "[[integration]]\nname = \"a\"\nparent = \"b\"\n[[integration]]\nname = \"b\"\nparent = \"a\"\n",
			[]string{`c.toml:1: integration "a": its parents lead back to it (a -> b -> a)`, "one of them must have no parent"}},
		{"too deep", "[[integration]]\nname = \"l0\"\n[[integration]]\nname = \"l1\"\nparent = \"l0\"\n[[integration]]\nname = \"l2\"\nparent = \"l1\"\n[[integration]]\nname = \"l3\"\nparent = \"l2\"\n[[integration]]\nname = \"l4\"\nparent = \"l3\"\n[[integration]]\nname = \"l5\"\nparent = \"l4\"\n",
			[]string{`c.toml:15: integration "l5": nested 5 deep (l5 -> l4 -> l3 -> l2 -> l1 -> l0); children may nest at most 4 deep`}},
		{"an integration declared twice", "[[integration]]\nname = \"a\"\n[[integration]]\nname = \"a\"\n", []string{`c.toml:3: integration "a": declared twice`}},
		{"a negative uid", "allow_uids = [-1]\n", []string{"c.toml:1:"}},
		{"an unknown audit arguments mode", "[audit]\narguments = \"hashed\"\n", []string{`arguments = "hashed"`, `"digest"`, `"full"`, `"none"`}},
		{"an endpoint that is not http", "[telemetry]\notlp_endpoint = \"127.0.0.1:4318\"\n", []string{"otlp_endpoint", "http://"}},
		{"an endpoint with no host", "[telemetry]\notlp_endpoint = \"http:///v1\"\n", []string{"otlp_endpoint", "no host"}},
		{"an unknown protocol", "[telemetry]\notlp_protocol = \"http/json\"\n", []string{`otlp_protocol = "http/json"`, `"grpc"`}},
		{"an empty service name", "[telemetry]\nservice_name = \" \"\n", []string{"service_name is empty"}},
		{"a header name that is not a token", "[telemetry]\nheaders = { \"x y\" = \"1\" }\n", []string{`"x y"`}},
		{"an unknown telemetry key, by line", "[telemetry]\n\notlp_endpiont = \"http://h\"\n", []string{"c.toml:3:1", `"telemetry.otlp_endpiont"`}},
		{"telemetry keys of the wrong type", "[telemetry]\naudit_logs = \"yes\"\n", []string{"c.toml:2:", "audit_logs", "true or false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("c.toml", []byte(tt.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestParseConfigAccepts(t *testing.T) {
	doc := `socket = "/run/k.sock"
audit_log = "/var/a.jsonl"
allow_uids = [1000, 1001]
[files]
root = "/srv/share"
allow_hard_links = true
[[grant]]
subject = "integration:claude-code"
resource = "files:/public"
descendants = true
actions = ["read", "list"]
expires = 2027-01-01T01:00:00+01:00
[[grant]]
subject = "integration:*"
resource = "sharedos:/escalate"
actions = ["escalate"]
`
	c, err := Parse("c.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Socket: "/run/k.sock", AuditLog: "/var/a.jsonl", AllowUIDs: []uint32{1000, 1001}, Root: "/srv/share", AllowHardLinks: true,
		Grants: []policy.Grant{
			{Subject: "integration:claude-code", Resource: policy.Resource{Namespace: "files", Path: "/public"}, Descendants: true,
				Actions: []string{"read", "list"}, Expires: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
			{Subject: "integration:*", Resource: policy.Resource{Namespace: "sharedos", Path: "/escalate"}, Actions: []string{"escalate"}},
		},
		Arguments: ArgumentsDigest,
		File:      "c.toml",
		Lines:     Lines{Root: 5, Grants: []int{7, 13}},
	}
	if !c.Grants[0].Expires.Equal(want.Grants[0].Expires) {
		t.Errorf("expires %v, want %v", c.Grants[0].Expires, want.Grants[0].Expires)
	}
	c.Grants[0].Expires = want.Grants[0].Expires
	if !reflect.DeepEqual(c, want) {
		t.Errorf("config\n %+v\nwant\n %+v", c, want)
	}
}

func TestParseGrantBudgetsAndIntegrations(t *testing.T) {
	doc := `operator_uids = [1001]
ask_timeout = "45s"
[[grant]]
subject = "integration:claude-code"
resource = "files:/src"
descendants = true
actions = ["read", "write"]
ask = "harness"
limit = "100/1h"
turn_limit = 20

[[grant]]
subject = "integration:claude-code.explorer"
resource = "files:/src"
descendants = true
actions = ["read"]
ask = "operator"
ask_ttl = "90s"

[[integration]]
name = "claude-code.explorer"
parent = "claude-code"
`
	c, err := Parse("c.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	g0, g1 := c.Grants[0], c.Grants[1]
	if g0.Ask != policy.AskHarness || g0.AskTTL != policy.DefaultAskTTL || g0.Limit != (policy.Limit{N: 100, Window: time.Hour}) || g0.TurnLimit != 20 {
		t.Errorf("grant #1 = %+v", g0)
	}
	if g1.Ask != policy.AskOperator || g1.AskTTL != 90*time.Second || !g1.Limit.IsZero() || g1.TurnLimit != 0 {
		t.Errorf("grant #2 = %+v", g1)
	}
	if !reflect.DeepEqual(c.OperatorUIDs, []uint32{1001}) || c.AskTimeout != 45*time.Second {
		t.Errorf("operator_uids = %v, ask_timeout = %v", c.OperatorUIDs, c.AskTimeout)
	}
	if got := c.Hierarchy.Chain("claude-code.explorer"); !reflect.DeepEqual(got, []string{"claude-code.explorer", "claude-code"}) {
		t.Errorf("chain = %v", got)
	}
	if !reflect.DeepEqual(c.Lines.Integrations, []int{20}) || c.IntegrationRef(0) != `c.toml:20: integration "claude-code.explorer"` {
		t.Errorf("integration lines %v, ref %q", c.Lines.Integrations, c.IntegrationRef(0))
	}
}

func TestTelemetryAndAuditTables(t *testing.T) {
	doc := `[[secret]]
name = "otlp_token"
env = "OTLP_TOKEN"
[audit]
arguments = "full"
[telemetry]
otlp_endpoint = "https://collector.example:4318"
otlp_protocol = "grpc"
headers = { authorization = "Bearer {secret:otlp_token}", "x-team" = "a" }
service_name = "kernel-7"
audit_logs = true
`
	c, err := Parse("c.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := &Telemetry{
		Endpoint: "https://collector.example:4318", Protocol: ProtocolGRPC, ServiceName: "kernel-7", AuditLogs: true,
		Headers: map[string]string{"authorization": "Bearer {secret:otlp_token}", "x-team": "a"},
	}
	if !reflect.DeepEqual(c.Telemetry, want) || c.Arguments != ArgumentsFull {
		t.Errorf("telemetry %+v, arguments %q\nwant %+v, %q", c.Telemetry, c.Arguments, want, ArgumentsFull)
	}

	c, err = Parse("c.toml", []byte("[telemetry]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Telemetry == nil || !reflect.DeepEqual(*c.Telemetry, Telemetry{}) || c.Arguments != ArgumentsDigest {
		t.Errorf("an empty [telemetry] is %+v and arguments %q; want an empty table (the OTEL_* variables fill it) and digest", c.Telemetry, c.Arguments)
	}
	if c, _ := Parse("c.toml", nil); c.Telemetry != nil {
		t.Errorf("no [telemetry] table gives %+v; want nil: nothing is exported", c.Telemetry)
	}
}

func TestAnEndpointsCredentialIsNotQuotedBack(t *testing.T) {
	_, err := Parse("c.toml", []byte("[telemetry]\notlp_endpoint = \"ftp://user:hunter2@host\"\n"))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v: want a refusal that does not quote the password", err)
	}
}

func TestLoadRecordsTheFilesDigest(t *testing.T) {
	file := filepath.Join(t.TempDir(), "k.toml")
	data := []byte("[files]\nroot = \"/srv\"\n")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if c.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("SHA256 %q, want the file's", c.SHA256)
	}
}

func TestDiffNamesWhatChanged(t *testing.T) {
	read := policy.Grant{Subject: "integration:claude-code", Resource: policy.Resource{Namespace: "files", Path: "/docs"}, Descendants: true, Actions: []string{"read", "list"}}
	write := policy.Grant{Subject: "integration:*", Resource: policy.Resource{Namespace: "files", Path: "/tmp"}, Actions: []string{"write"},
		Expires: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
	mem := upstream.Spec{Name: "memory", Command: []string{"mem"}, Env: map[string]string{"TOKEN": "s3cret"}}
	git := upstream.Spec{Name: "git", Command: []string{"git-mcp"}}
	first := Config{Grants: []policy.Grant{read}, Upstreams: []upstream.Spec{mem, git}, Arguments: ArgumentsDigest}

	start := Diff(Config{}, first)
	wantStart := Changes{Added: []string{
		"grant integration:claude-code files:/docs and below: read, list", "upstream memory", "upstream git", "audit arguments digest",
	}}
	if !reflect.DeepEqual(start, wantStart) {
		t.Errorf("at start\n%q\nwant\n%q", start, wantStart)
	}

	changedMem := mem
	changedMem.Env = map[string]string{"TOKEN": "0ther"}
	next := Config{Grants: []policy.Grant{write}, Upstreams: []upstream.Spec{changedMem}, Arguments: ArgumentsNone, Telemetry: &Telemetry{AuditLogs: true}}
	got := Diff(first, next)
	want := Changes{
		Added:   []string{"grant integration:* files:/tmp: write until 2027-01-01T00:00:00Z", "telemetry"},
		Removed: []string{"grant integration:claude-code files:/docs and below: read, list", "upstream git"},
		Changed: []string{"upstream memory", "audit arguments none"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("on reload\n%q\nwant\n%q", got, want)
	}
	if strings.Contains(fmt.Sprint(got), "s3cret") || strings.Contains(fmt.Sprint(got), "0ther") {
		t.Error("the changes show an upstream's env")
	}
	if d := Diff(next, next); d.Added != nil || d.Removed != nil || d.Changed != nil {
		t.Errorf("the same config changes %q", d)
	}

	limited := read
	limited.Limit, limited.TurnLimit, limited.Ask, limited.AskTTL = policy.Limit{N: 100, Window: time.Hour}, 20, policy.AskHarness, 10*time.Minute
	child := policy.Integration{Name: "claude-code.explorer", Parent: "claude-code"}
	moved := policy.Integration{Name: "claude-code.explorer", Parent: "codex"}
	got = Diff(Config{Grants: []policy.Grant{read}, Integrations: []policy.Integration{child}}, Config{Grants: []policy.Grant{limited}, Integrations: []policy.Integration{moved}})
	want = Changes{
		Added:   []string{"grant integration:claude-code files:/docs and below: read, list, limit 100/1h, turn_limit 20, ask harness for 10m0s"},
		Removed: []string{"grant integration:claude-code files:/docs and below: read, list"},
		Changed: []string{"integration claude-code.explorer, child of codex"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("a grant's budget and a child's parent\n%q\nwant\n%q", got, want)
	}
}

// TestDiffNamesSecretsNotTheirSources: a secret is added, removed or
// changed (its source) by name; where it is read from is not on the
// record, and its value is not in a config at all.
func TestDiffNamesSecretsNotTheirSources(t *testing.T) {
	token := secret.Spec{Name: "github-token", Kind: secret.KindEnv, Env: "GITHUB_TOKEN"}
	old := secret.Spec{Name: "old-token", Kind: secret.KindFile, File: "/home/me/old-token"}
	moved := token
	moved.Env = "GH_TOKEN_ROTATED"
	added := secret.Spec{Name: "otlp", Kind: secret.KindCommand, Command: []string{"pass", "show", "otlp"}}
	got := Diff(Config{Secrets: []secret.Spec{token, old}}, Config{Secrets: []secret.Spec{moved, added}})
	want := Changes{Added: []string{"secret otlp"}, Removed: []string{"secret old-token"}, Changed: []string{"secret github-token"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	for _, source := range []string{"GITHUB_TOKEN", "GH_TOKEN_ROTATED", "/home/me", "pass show"} {
		if strings.Contains(fmt.Sprint(got), source) {
			t.Errorf("the changes show a secret's source %q: %q", source, got)
		}
	}
	if d := Diff(Config{Secrets: []secret.Spec{token}}, Config{Secrets: []secret.Spec{token}}); d.Added != nil || d.Removed != nil || d.Changed != nil {
		t.Errorf("the same secrets change %q", d)
	}
}

func TestShippedConfigsLoad(t *testing.T) {
	for _, name := range []string{"example.toml", "readonly.toml"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join("..", "..", "testdata", "kernel", name)
			c, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			// A relative root is relative to the config file.
			if want := filepath.Join("..", "..", "testdata", "kernel", "demo-root"); c.Root != want {
				t.Errorf("root %q, want %q", c.Root, want)
			}
			if _, err := CheckRoot(c.Root); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestCheckRoot(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := CheckRoot(dir); err != nil || got != dir {
		t.Errorf("CheckRoot(dir) = %q, %v", got, err)
	}
	for _, bad := range []string{"", file, filepath.Join(dir, "missing")} {
		if _, err := CheckRoot(bad); err == nil {
			t.Errorf("CheckRoot(%q) accepted", bad)
		}
	}
}

// Messages name the key, what it wants and what it got, never a Go type.
func TestConfigTypeErrorsSpeakTOML(t *testing.T) {
	const head = "[[grant]]\nsubject = \"integration:x\"\nresource = \"files:/\"\n"
	tests := []struct{ doc, want string }{
		{head + "actions = \"read\"\n", `c.toml:4:11: grant.actions: want an array of strings, e.g. actions = ["read", "list"], have a string`},
		{head + "actions = [\"read\", 5]\n", `c.toml:4:20: grant.actions: want an array of strings, e.g. actions = ["read", "list"], have an integer`},
		{head + "actions = [\"read\"]\ndescendants = \"yes\"\n", `c.toml:5:15: grant.descendants: want true or false, have a string`},
		{"allow_uids = [-1]\n", `c.toml:1:15: allow_uids: want an array of uids, e.g. allow_uids = [1000], have -1`},
		{"allow_uids = \"1000\"\n", `c.toml:1:14: allow_uids: want an array of uids, e.g. allow_uids = [1000], have a string`},
		{"[files]\nroot = 5\n", `c.toml:2:8: files.root: want a string, e.g. root = "~/work", have an integer`},
	}
	for _, tt := range tests {
		_, err := Parse("c.toml", []byte(tt.doc))
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q:\n got %v\nwant %s", tt.doc, err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), "of type") || strings.Contains(err.Error(), "fileGrant") || strings.Contains(err.Error(), "uint32")) {
			t.Errorf("%q: a Go type in %q", tt.doc, err)
		}
	}
}

// A namespace no tool lives in is a grant that could never match: the
// config is refused, naming the grant's line and the namespaces there are.
func TestConfigRefusesAnUnknownNamespace(t *testing.T) {
	doc := "[files]\nroot = \"/srv\"\n\n[[grant]]\nsubject = \"integration:*\"\nresource = \"file:/docs\"\nactions = [\"read\"]\n"
	_, err := Parse("c.toml", []byte(doc))
	want := `c.toml:4: grant #1: resource "file:/docs": unknown namespace "file", so the grant could never match (the namespaces are files, sharedos); did you mean files:/docs?`
	var ce *Error
	if err == nil || err.Error() != want || !errors.As(err, &ce) || ce.File != "c.toml" {
		t.Errorf("got %v\nwant %s", err, want)
	}
	if ns := (Config{}).Namespaces(); strings.Join(ns, ",") != "files,sharedos" {
		t.Errorf("Namespaces = %v", ns)
	}
}

// TestConfigLines pins what configLines reads from go-toml's unstable
// parser: the line of [files] root and of each [[grant]] header.
func TestConfigLines(t *testing.T) {
	doc := "# comment\nsocket = \"/s\"\n\n[files]\n# the root\nroot = \"/srv\"\n\n[[grant]]\nsubject = \"integration:*\"\nresource = \"files:/\"\nactions = [\"read\"]\n\n\n[[ grant ]]\nsubject = \"integration:*\"\nresource = \"sharedos:/escalate\"\nactions = [\"escalate\"]\n"
	c, err := Parse("c.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if c.Lines.Root != 6 || !reflect.DeepEqual(c.Lines.Grants, []int{8, 14}) {
		t.Errorf("lines %+v, want root 6, grants [8 14]", c.Lines)
	}
	if got := c.GrantRef(1); got != "c.toml:14: grant #2" {
		t.Errorf("GrantRef(1) = %q", got)
	}
	if got := c.RootRef(); got != "[files] root at c.toml:6" {
		t.Errorf("RootRef = %q", got)
	}
	// A dotted key at the top level sets the root too.
	if c, err := Parse("k.toml", []byte("files.root = \"/srv\"\n")); err != nil || c.Lines.Root != 1 {
		t.Errorf("dotted files.root: line %d (%v), want 1", c.Lines.Root, err)
	}
	if got := Default("/srv").GrantRef(0); got != "grant #1" {
		t.Errorf("the default's GrantRef = %q", got)
	}
}

// A reference names the file and line when both are known, the file alone
// when the line is not, and the thing alone for a config from no file.
func TestRefsWithAndWithoutLines(t *testing.T) {
	withLines := Config{
		File:         "c.toml",
		Grants:       make([]policy.Grant, 1),
		Upstreams:    []upstream.Spec{{Name: "memory"}},
		Integrations: []policy.Integration{{Name: "cc"}},
		Lines:        Lines{Grants: []int{4}, Upstreams: []int{9}, Integrations: []int{12}},
	}
	noLines := withLines
	noLines.Lines = Lines{}
	noFile := withLines
	noFile.File = ""
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"grant with its line", withLines.GrantRef(0), "c.toml:4: grant #1"},
		{"upstream with its line", withLines.UpstreamRef(0), "c.toml:9: upstream memory"},
		{"integration with its line", withLines.IntegrationRef(0), `c.toml:12: integration "cc"`},
		{"grant without a line", noLines.GrantRef(0), "c.toml: grant #1"},
		{"upstream without a line", noLines.UpstreamRef(0), "c.toml: upstream memory"},
		{"integration without a line", noLines.IntegrationRef(0), `c.toml: integration "cc"`},
		{"grant from no file", noFile.GrantRef(0), "grant #1"},
		{"upstream from no file", noFile.UpstreamRef(0), "upstream memory"},
		{"integration from no file", noFile.IntegrationRef(0), `integration "cc"`},
		{"upstream past the end", withLines.UpstreamRef(3), "c.toml: upstream"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestLoadConfigExpandsTheHomeDirectory(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := t.TempDir()
	file := filepath.Join(dir, "k.toml")
	if err := os.WriteFile(file, []byte("socket = \"~/k.sock\"\naudit_log = \"rel/a.jsonl\"\n[files]\nroot = \"~\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if c.Socket != filepath.Join(home, "k.sock") || c.Root != home || c.AuditLog != filepath.Join(dir, "rel", "a.jsonl") {
		t.Errorf("socket %q, root %q, audit %q", c.Socket, c.Root, c.AuditLog)
	}
	if err := os.WriteFile(file, []byte("[files]\nroot = \"~alice/work\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(file); err == nil || !strings.Contains(err.Error(), `[files] root: "~alice/work": only ~ and ~/ are expanded`) {
		t.Errorf("~user: %v", err)
	}
}

func TestDefaultConfigPath(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/x/sharedos/kernel.toml"},
		{map[string]string{"XDG_CONFIG_HOME": "relative", "HOME": "/h"}, "/h/.config/sharedos/kernel.toml"},
		{map[string]string{"HOME": "/h"}, "/h/.config/sharedos/kernel.toml"},
	} {
		got, err := DefaultPath(func(k string) string { return tt.env[k] })
		if err != nil || got != tt.want {
			t.Errorf("%v: %q, %v; want %q", tt.env, got, err, tt.want)
		}
	}
	if _, err := DefaultPath(func(string) string { return "" }); err == nil {
		t.Error("no HOME: want an error")
	}
}

func TestCheckRootSaysWhatIsWrongWithoutThePathTwice(t *testing.T) {
	dir := t.TempDir()
	var re *RootError
	_, err := CheckRoot(filepath.Join(dir, "missing"))
	if !errors.As(err, &re) || re.Path != filepath.Join(dir, "missing") || re.Err.Error() != "no such file or directory" {
		t.Errorf("missing root: %v (%+v)", err, re)
	}
	if _, err := CheckRoot(""); !errors.Is(err, ErrNoRoot) {
		t.Errorf("empty root: %v", err)
	}
}

func TestConfigUpstreams(t *testing.T) {
	doc := `state_dir = "~/state"

[[upstream]]
name = "memory"
command = ["npx", "-y", "@modelcontextprotocol/server-memory"]
env = { MEMORY_FILE_PATH = "/tmp/m.jsonl" }
call_timeout = "5s"

[[upstream.tool]]
name = "read_graph"
action = "read"
resource = "/graph"

[[grant]]
subject = "integration:claude-code"
resource = "memory:/"
descendants = true
actions = ["read"]
`
	c, err := Parse("c.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Upstreams) != 1 || c.Upstreams[0].Name != "memory" || c.Upstreams[0].CallTimeout != 5*time.Second ||
		c.Upstreams[0].Env["MEMORY_FILE_PATH"] != "/tmp/m.jsonl" || c.Upstreams[0].Tools["read_graph"].Action != "read" {
		t.Errorf("upstreams %+v", c.Upstreams)
	}
	// Without [files]: valid, and the grant on the upstream's namespace is known.
	if ns := c.Namespaces(); strings.Join(ns, ",") != "files,sharedos,memory" {
		t.Errorf("Namespaces = %v", ns)
	}
	if c.Root != "" || c.StateDir != "~/state" || c.UpstreamRef(0) != "c.toml:3: upstream memory" {
		t.Errorf("root %q, state_dir %q, ref %q", c.Root, c.StateDir, c.UpstreamRef(0))
	}

	// Load resolves state_dir and runs an upstream in the file's
	// directory, or in its cwd taken from there.
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := t.TempDir()
	file := filepath.Join(dir, "k.toml")
	if err := os.WriteFile(file, []byte(doc+"\n[[upstream]]\nname = \"other\"\ncommand = [\"x\"]\ncwd = \"sub\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if c.StateDir != filepath.Join(home, "state") || c.Upstreams[0].Dir != dir || c.Upstreams[1].Dir != filepath.Join(dir, "sub") {
		t.Errorf("state_dir %q, dirs %q %q", c.StateDir, c.Upstreams[0].Dir, c.Upstreams[1].Dir)
	}
}

func TestConfigRefusesBadUpstreamsWithTheirLine(t *testing.T) {
	const up = "[[upstream]]\nname = \"memory\"\ncommand = [\"server\"]\n"
	tests := []struct{ name, doc, want string }{
		{"a reserved name", "[[upstream]]\nname = \"files\"\ncommand = [\"x\"]\n", `c.toml:2:1: upstream #1 name: "files": the name is reserved for the kernel's own tools`},
		{"the other reserved name", "\n[[upstream]]\ncommand = [\"x\"]\nname = \"sharedos\"\n", `c.toml:4:1: upstream #1 name: "sharedos": the name is reserved`},
		{"two upstreams with one name", up + "\n" + up, `c.toml:6:1: upstream #2 name: "memory": another upstream already has this name`},
		{"neither command nor url", "[[upstream]]\nname = \"m\"\n", `c.toml:1:3: upstream #1: an upstream needs command (a program the kernel runs) or url (a Streamable HTTP server)`},
		{"a bad duration", up + "call_timeout = \"soon\"\n", `c.toml:4:1: upstream #1 call_timeout: "soon" is not a duration`},
		{"a bad action", up + "[[upstream.tool]]\nname = \"t\"\naction = \"delete\"\n", `c.toml:6:1: upstream #1 tool #1 action: "delete": the action must be one of read, list, search, write, call`},
		{"a bad template", up + "[[upstream.tool]]\nname = \"t\"\nresource = \"/a/{b}{c}\"\n", `c.toml:6:1: upstream #1 tool #1 resource:`},
		{"an unknown key", up + "comand = [\"x\"]\n", `c.toml:4:1: unknown key "upstream.comand"`},
		{"a grant on an upstream that is not configured", up + "[[grant]]\nsubject = \"integration:*\"\nresource = \"memroy:/\"\nactions = [\"read\"]\n", `unknown namespace "memroy", so the grant could never match (the namespaces are files, sharedos, memory); did you mean memory:/?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("c.toml", []byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v\nwant %s", err, tt.want)
			}
		})
	}
}
