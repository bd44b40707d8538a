package policy

import (
	"encoding/json"
	"errors"
	"path"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseTemplate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"the namespace root", "/", true},
		{"one literal segment", "/graph", true},
		{"literals and placeholders", "/repos/{owner}/{repo}", true},
		{"a placeholder first", "/{owner}", true},
		{"a placeholder between literals", "/repos/{owner}/issues", true},
		{"placeholder names with every allowed character", "/{a_b-c.D9}", true},
		{"a relative path", "repos/{owner}", false},
		{"empty", "", false},
		{"a trailing slash", "/repos/", false},
		{"a doubled slash", "/repos//{owner}", false},
		{"a dot segment", "/./x", false},
		{"a dot-dot segment", "/repos/../x", false},
		{"a placeholder inside a segment", "/repos/x{owner}", false},
		{"two placeholders in one segment", "/{owner}{repo}", false},
		{"an unclosed brace", "/{owner", false},
		{"a stray closing brace", "/owner}", false},
		{"an empty placeholder", "/{}", false},
		{"a placeholder with a slash in its name", "/{a/b}", false},
		{"a placeholder with a space in its name", "/{a b}", false},
		{"a nested placeholder", "/{{a}}", false},
		{"a placeholder used twice", "/{a}/x/{a}", false},
		{"a NUL in a literal", "/a\x00b", false},
		{"a placeholder name of 65 characters", "/{" + strings.Repeat("a", 65) + "}", false},
		{"a placeholder name of 64 characters", "/{" + strings.Repeat("a", 64) + "}", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm, err := ParseTemplate(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("ParseTemplate(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if err == nil && tm.String() != tt.in {
				t.Errorf("String() = %q, want %q", tm.String(), tt.in)
			}
		})
	}
}

func TestTemplatePrefixAndArguments(t *testing.T) {
	tests := []struct {
		in       string
		prefix   string
		args     []string
		segments int
	}{
		{"/", "/", nil, 0},
		{"/graph", "/graph", nil, 1},
		{"/repos/{owner}/{repo}", "/repos", []string{"owner", "repo"}, 3},
		{"/{owner}/x", "/", []string{"owner"}, 2},
		{"/a/b/{n}/c/{m}", "/a/b", []string{"n", "m"}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			tm, err := ParseTemplate(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := tm.Prefix(); got != tt.prefix {
				t.Errorf("Prefix() = %q, want %q", got, tt.prefix)
			}
			if got := tm.Arguments(); !reflect.DeepEqual(got, tt.args) {
				t.Errorf("Arguments() = %q, want %q", got, tt.args)
			}
			if got := len(tm.segs); got != tt.segments {
				t.Errorf("%d segments, want %d", got, tt.segments)
			}
		})
	}
}

func TestLiteralTemplate(t *testing.T) {
	tm, err := LiteralTemplate("read_graph")
	if err != nil {
		t.Fatal(err)
	}
	if tm.String() != "/read_graph" || tm.Prefix() != "/read_graph" || tm.Arguments() != nil {
		t.Errorf("LiteralTemplate(read_graph) = %q prefix %q args %q", tm.String(), tm.Prefix(), tm.Arguments())
	}
	braces, err := LiteralTemplate("{x}")
	if err != nil {
		t.Fatal(err)
	}
	if braces.Arguments() != nil {
		t.Errorf("braces in a literal became placeholder %q", braces.Arguments())
	}
	if f, err := braces.Fill(nil, nil); err != nil || f.Path != "/{x}" {
		t.Errorf("Fill = %q, %v; want the literal", f.Path, err)
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a\x00"} {
		if _, err := LiteralTemplate(bad); err == nil {
			t.Errorf("LiteralTemplate(%q) accepted", bad)
		}
	}
}

func TestFill(t *testing.T) {
	repos, err := ParseTemplate("/repos/{owner}/{repo}")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		owner string // raw JSON; "" leaves the argument out
		want  string // "" means refused
	}{
		{"a plain string", `"acme"`, "/repos/acme/widget"},
		{"an integer", `42`, "/repos/42/widget"},
		{"a negative integer", `-7`, "/repos/-7/widget"},
		{"negative zero names zero", `-0`, "/repos/0/widget"},
		{"an integral float names the integer", `3.0`, "/repos/3/widget"},
		{"an exponent that is an integer", `1e3`, "/repos/1000/widget"},
		{"the largest safe integer", `9007199254740991`, "/repos/9007199254740991/widget"},
		{"a string with spaces and unicode", `"a b é"`, "/repos/a b é/widget"},
		{"a dot inside", `"v1.2"`, "/repos/v1.2/widget"},
		{"white space inside", `"a  b"`, "/repos/a  b/widget"},
		{"dot-dot", `".."`, ""},
		{"dot", `"."`, ""},
		{"dot-dot written with escapes", `"\u002e\u002e"`, ""},
		{"empty", `""`, ""},
		{"a slash", `"a/b"`, ""},
		{"a slash written as an escape", `"a\/b"`, ""},
		{"a slash alone", `"/"`, ""},
		{"a leading slash", `"/etc"`, ""},
		{"a NUL", `"a\u0000b"`, ""},
		{"a fraction", `3.5`, ""},
		{"beyond the safe integers", `9007199254740992`, ""},
		{"a huge exponent", `1e400`, ""},
		{"true", `true`, ""},
		{"null", `null`, ""},
		{"an object", `{"a":"b"}`, ""},
		{"an array", `["acme"]`, ""},
		{"missing", "", ""},
		{"longer than a segment may be", `"` + strings.Repeat("a", MaxSegment+1) + `"`, ""},
		{"exactly as long as a segment may be", `"` + strings.Repeat("a", MaxSegment) + `"`, "/repos/" + strings.Repeat("a", MaxSegment) + "/widget"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := map[string]json.RawMessage{"repo": json.RawMessage(`"widget"`)}
			if tt.owner != "" {
				args["owner"] = json.RawMessage(tt.owner)
			}
			f, err := repos.Fill(args, nil)
			got := f.Path
			if tt.want == "" {
				var ae *ArgumentError
				if !errors.As(err, &ae) || ae.Argument != "owner" {
					t.Fatalf("Fill = %q, %v; want an *ArgumentError about owner", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Fill = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestLookAlikeSegmentsAreRefused is issue 24's sixth finding: values
// that are one segment to the kernel but a path, or another segment, to
// an upstream that percent-decodes, treats '\' as a separator,
// NFKC-normalizes or trims.
func TestLookAlikeSegmentsAreRefused(t *testing.T) {
	for _, v := range []string{
		`..%2F..%2Fother`, `%2e%2e`, `100%`,
		`..\..\other`, `a\b`, `\`,
		"．．", "․․", "．", "‥", "a／b", "a＼b", "﹒﹒",
		" ..", ".. ", " a", "a ", "\ta", "a\u00a0", "\u3000a",
		"a\u0001b", "a\u007fb", "a\u0085b", "\nx",
	} {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if seg, err := ArgumentSegment(raw); err == nil {
			t.Errorf("ArgumentSegment(%s) = %q, want refused", raw, seg)
		}
	}
	for _, v := range []string{"a b", "café", "v1.2", "..a", "a..", "…", "x-y_z", "日本"} {
		raw, _ := json.Marshal(v)
		if seg, err := ArgumentSegment(raw); err != nil || seg != v {
			t.Errorf("ArgumentSegment(%s) = %q, %v; want it as it is", raw, seg, err)
		}
	}
}

func TestFilledResourcesAreAuthorizedSegmentBySegment(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	grants := []Grant{{Subject: "integration:cc", Resource: res(t, "github:/repos/acme"), Descendants: true, Actions: []string{ActionCall}}}
	repos, err := ParseTemplate("/repos/{owner}/{repo}")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		owner, repo string
		want        Decision
	}{
		{`"acme"`, `"widget"`, Allowed},
		{`"acme-corp"`, `"widget"`, NoMatchingGrant},
		{`"other"`, `"acme"`, NoMatchingGrant},
	}
	for _, tt := range tests {
		f, err := repos.Fill(map[string]json.RawMessage{"owner": json.RawMessage(tt.owner), "repo": json.RawMessage(tt.repo)}, nil)
		p := f.Path
		if err != nil {
			t.Fatal(err)
		}
		r, err := ParseResource("github:" + p)
		if err != nil {
			t.Fatalf("filled path %q is not a resource: %v", p, err)
		}
		if got := Authorize(grants, Request{Integration: "cc", Resource: r, Action: ActionCall, Time: now}); got != tt.want {
			t.Errorf("%s: Authorize = %v, want %v", p, got, tt.want)
		}
	}
	if !Discoverable(grants, "cc", Resource{Namespace: "github", Path: repos.Prefix()}, ActionCall, now) {
		t.Error("a grant under the template's prefix does not make the tool discoverable")
	}
	issues, err := ParseTemplate("/issues/{n}")
	if err != nil {
		t.Fatal(err)
	}
	if Discoverable(grants, "cc", Resource{Namespace: "github", Path: issues.Prefix()}, ActionCall, now) {
		t.Error("a grant elsewhere in the namespace makes the tool discoverable")
	}
}

func TestRootTemplateFillsToTheRoot(t *testing.T) {
	root, err := ParseTemplate("/")
	if err != nil {
		t.Fatal(err)
	}
	if f, err := root.Fill(map[string]json.RawMessage{"x": json.RawMessage(`".."`)}, nil); err != nil || f.Path != "/" {
		t.Errorf("Fill = %q, %v; want \"/\"", f.Path, err)
	}
}

// FuzzTemplateFill fills templates with arbitrary argument values and
// checks that no value can leave its segment: whatever is accepted is a
// clean path with the template's number of segments, its literals where
// they were, under its prefix.
func FuzzTemplateFill(f *testing.F) {
	for _, seed := range []struct{ tmpl, a, b string }{
		{"/repos/{owner}/{repo}", `"acme"`, `"widget"`},
		{"/repos/{owner}/{repo}", `".."`, `"x"`},
		{"/repos/{owner}/{repo}", `"a/b"`, `"."`},
		{"/{a}", `"\u002e\u002e"`, `0`},
		{"/x/{a}/y/{b}", `"\u0000"`, `1e3`},
		{"/x/{a}/y/{b}", `"\ud800"`, `-0`},
		{"/{a}/{b}", `"%2e%2e"`, `"..\\.."`},
		{"/{a}/{b}", `"//"`, `9007199254740993`},
		{"/", `".."`, `".."`},
		{"/fs/{p:path}", `"/a/../b"`, `"x"`},
		{"/fs/{p:path}", `"a/../../b"`, `"x"`},
		{"/{u:url}", `"https://Docs.Example.com:443/a/%2e%2e/b"`, `"x"`},
		{"/{u:url}", `"http://127.1/"`, `"x"`},
	} {
		f.Add(seed.tmpl, seed.a, seed.b)
	}
	f.Fuzz(func(t *testing.T, tmpl, a, b string) {
		tm, err := ParseTemplate(tmpl)
		if err != nil {
			return
		}
		names := tm.Arguments()
		args := map[string]json.RawMessage{}
		for i, n := range names {
			v := a
			if i%2 == 1 {
				v = b
			}
			args[n] = json.RawMessage(v)
		}
		// The same values as strings, as a model would most often send them.
		quoted := map[string]json.RawMessage{}
		for n, v := range args {
			q, _ := json.Marshal(string(v))
			quoted[n] = q
		}
		for _, in := range []map[string]json.RawMessage{args, quoted} {
			f, err := tm.Fill(in, nil)
			p := f.Path
			if err != nil {
				var ae *ArgumentError
				if !errors.As(err, &ae) {
					t.Fatalf("Fill error %v is not an *ArgumentError", err)
				}
				continue
			}
			checkFilled(t, tm, p)
		}
	})
}

func checkFilled(t *testing.T, tm Template, p string) {
	t.Helper()
	if path.Clean(p) != p || !strings.HasPrefix(p, "/") {
		t.Fatalf("%s filled to %q, which is not clean", tm, p)
	}
	if strings.ContainsRune(p, 0) {
		t.Fatalf("%s filled to %q, which holds a NUL", tm, p)
	}
	if _, err := ParseResource("ns:" + p); err != nil {
		t.Fatalf("%s filled to %q, not a resource: %v", tm, p, err)
	}
	var got []string
	if p != "/" {
		got = strings.Split(p[1:], "/")
	}
	typed := len(tm.segs) > 0 && tm.segs[len(tm.segs)-1].kind != KindSegment
	if len(got) != len(tm.segs) && !(typed && len(got) >= len(tm.segs)-1) {
		t.Fatalf("%s filled to %q: %d segments, want %d", tm, p, len(got), len(tm.segs))
	}
	for i, seg := range got {
		if i < len(tm.segs) && tm.segs[i].arg == "" && seg != tm.segs[i].literal {
			t.Fatalf("%s filled to %q: segment %d is %q, want the literal %q", tm, p, i, seg, tm.segs[i].literal)
		}
		if seg == "." || seg == ".." || seg == "" {
			t.Fatalf("%s filled to %q: segment %d is %q", tm, p, i, seg)
		}
		if i >= len(tm.segs)-1 && tm.segs[len(tm.segs)-1].arg != "" && segmentProblem(seg) != "" {
			t.Fatalf("%s filled to %q: segment %d %q %s", tm, p, i, seg, segmentProblem(seg))
		}
	}
	prefix := tm.Prefix()
	if !(p == prefix || prefix == "/" || strings.HasPrefix(p, prefix+"/")) {
		t.Fatalf("%s filled to %q, not under its prefix %q", tm, p, prefix)
	}
}
