package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestTypedPlaceholdersParse(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{"/{path:path}", true},
		{"/repos/{o}/{r}/files/{p:path}", true},
		{"/{u:url}", true},
		{"/web/{u:url}", true},
		{"/{p:path}/x", false},
		{"/{p:path}/{q}", false},
		{"/{p:path}/{u:url}", false},
		{"/{p:file}", false},
		{"/{p:}", false},
		{"/{:path}", false},
		{"/{p:path:x}", false},
	} {
		tm, err := ParseTemplate(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseTemplate(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
		if err == nil && tm.String() != tt.in {
			t.Errorf("String() = %q", tm.String())
		}
	}
	tm, _ := ParseTemplate("/r/{o}/{p:path}")
	want := []Placeholder{{Name: "o", Kind: KindSegment}, {Name: "p", Kind: KindPath}}
	if got := tm.Placeholders(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Placeholders() = %+v", got)
	}
	if tm.Prefix() != "/r" {
		t.Errorf("Prefix() = %q", tm.Prefix())
	}
}

func TestPathPlaceholder(t *testing.T) {
	root, _ := ParseTemplate("/{path:path}")
	under, _ := ParseTemplate("/files/{p:path}")
	tests := []struct {
		name    string
		tm      Template
		arg     string // the path, as a Go string
		path    string // "" means refused
		forward string
	}{
		{"an absolute path names itself", root, "/home/me/work/docs/a.md", "/home/me/work/docs/a.md", "/home/me/work/docs/a.md"},
		{"dot segments are dropped, dot-dot taken back", root, "/home/me/./work/../work//docs/", "/home/me/work/docs", "/home/me/work/docs"},
		{"a relative path is under the placeholder", under, "docs/a.md", "/files/docs/a.md", "docs/a.md"},
		{"a relative dot-dot that stays inside", under, "docs/../a.md", "/files/a.md", "a.md"},
		{"the root", root, "/", "/", "/"},
		{"dot", under, ".", "/files", "."},
		{"spaces inside names", root, "/My Documents/a b.txt", "/My Documents/a b.txt", "/My Documents/a b.txt"},
		{"climbing above the root", root, "/../etc/passwd", "", ""},
		{"climbing above a relative start", under, "../secret", "", ""},
		{"climbing further than it went", under, "a/../../secret", "", ""},
		{"empty", root, "", "", ""},
		{"percent", root, "/a/..%2F..%2Fb", "", ""},
		{"a backslash", root, `/a\..\..\b`, "", ""},
		{"fullwidth dots", root, "/a/．．/b", "", ""},
		{"one dot leaders", root, "/a/․․/b", "", ""},
		{"a trailing space", root, "/a/.. /b", "", ""},
		{"a leading space", root, "/a/ ../b", "", ""},
		{"a control character", root, "/a/b\u0085", "", ""},
		{"NUL", root, "/a\x00", "", ""},
		{"too long", root, "/" + strings.Repeat("a", MaxPathValue), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, _ := json.Marshal(tt.arg)
			arg := "path"
			if tt.tm.String() != root.String() {
				arg = "p"
			}
			f, err := tt.tm.Fill(map[string]json.RawMessage{arg: raw}, nil)
			if tt.path == "" {
				var ae *ArgumentError
				if !errors.As(err, &ae) || ae.Argument != arg {
					t.Fatalf("Fill = %+v, %v; want an *ArgumentError about %s", f, err, arg)
				}
				return
			}
			if err != nil || f.Path != tt.path {
				t.Fatalf("Fill = %q, %v; want %q", f.Path, err, tt.path)
			}
			var fwd string
			if err := json.Unmarshal(f.Forward[arg], &fwd); err != nil || fwd != tt.forward {
				t.Errorf("forwards %s, want %q", f.Forward[arg], tt.forward)
			}
		})
	}
	for _, raw := range []string{`7`, `["/a"]`, `null`, `{"p":"/a"}`} {
		if _, err := root.Fill(map[string]json.RawMessage{"path": json.RawMessage(raw)}, nil); err == nil {
			t.Errorf("Fill(%s) accepted", raw)
		}
	}
}

func TestPathPlaceholderOnTheHost(t *testing.T) {
	root, _ := ParseTemplate("/{path:path}")
	links := map[string]string{"/work/out": "/etc", "/work/docs": "/work/docs", "rel": "/work/rel"}
	host := func(p string) (string, error) {
		for from, to := range links {
			if p == from || strings.HasPrefix(p, from+"/") {
				return to + strings.TrimPrefix(p, from), nil
			}
		}
		if !strings.HasPrefix(p, "/") {
			return "", errors.New("is relative")
		}
		return p, nil
	}
	for _, tt := range []struct{ arg, path string }{
		{"/work/docs/a.md", "/work/docs/a.md"},
		{"/work/out/passwd", "/etc/passwd"},
		{"/work/./out/../out/x", "/etc/x"},
		{"rel/a", "/work/rel/a"},
	} {
		raw, _ := json.Marshal(tt.arg)
		f, err := root.Fill(map[string]json.RawMessage{"path": raw}, host)
		if err != nil || f.Path != tt.path || string(f.Forward["path"]) != `"`+tt.path+`"` {
			t.Errorf("Fill(%s) = %+v, %v; want %s, forwarded as it is", tt.arg, f, err, tt.path)
		}
	}
	links["/work/bad"] = "/odd/%2e"
	raw, _ := json.Marshal("/work/bad/x")
	if f, err := root.Fill(map[string]json.RawMessage{"path": raw}, host); err == nil || !strings.Contains(err.Error(), "leads to") {
		t.Errorf("a path leading where no resource can name = %+v, %v", f, err)
	}
	raw, _ = json.Marshal("other")
	if _, err := root.Fill(map[string]json.RawMessage{"path": raw}, host); err == nil || !strings.Contains(err.Error(), "is relative") {
		t.Errorf("the host's refusal is not the error: %v", err)
	}
}

func TestURLPlaceholder(t *testing.T) {
	web, _ := ParseTemplate("/{u:url}")
	tests := []struct {
		arg, path, forward string // path "" means refused
	}{
		{"https://docs.example.com/guide/intro", "/docs.example.com/guide/intro", "https://docs.example.com/guide/intro"},
		{"HTTPS://Docs.Example.COM:443/a?q=1#frag", "/docs.example.com/a", "https://docs.example.com/a?q=1"},
		{"http://docs.example.com:80", "/docs.example.com", "http://docs.example.com/"},
		{"http://docs.example.com:8080/x/", "/docs.example.com:8080/x", "http://docs.example.com:8080/x/"},
		{"https://bücher.example/ä%20b", "/xn--bcher-kva.example/ä b", "https://xn--bcher-kva.example/%C3%A4%20b"},
		{"https://docs.example.com/a/./b/../c", "/docs.example.com/a/c", "https://docs.example.com/a/c"},
		{"https://docs.example.com./a", "/docs.example.com/a", "https://docs.example.com/a"},
		{"https://docs.example.com/%2e%2e/x", "", ""},
		{"https://docs.example.com/../x", "", ""},
		{"https://docs.example.com/a%2Fb", "", ""},
		{"https://docs.example.com/a%5Cb", "", ""},
		{"https://docs.example.com/%25", "", ""},
		{"https://user:pw@docs.example.com/", "", ""},
		{"https://user@docs.example.com/", "", ""},
		{"ftp://docs.example.com/", "", ""},
		{"file:///etc/passwd", "", ""},
		{"javascript:alert(1)", "", ""},
		{"//docs.example.com/", "", ""},
		{"docs.example.com/a", "", ""},
		{"https://127.0.0.1/", "", ""},
		{"https://[::1]/", "", ""},
		{"https://127.1/", "", ""},
		{"https://2130706433/", "", ""},
		{"https://0x7f.1/", "", ""},
		{"https://docs.example.com:0/", "", ""},
		{"https://docs.example.com:99999/", "", ""},
		{"https://docs.example.com:/", "", ""},
		{"https://exa mple.com/", "", ""},
		{"https:///a", "", ""},
		{"", "", ""},
	}
	for _, tt := range tests {
		raw, _ := json.Marshal(tt.arg)
		f, err := web.Fill(map[string]json.RawMessage{"u": raw}, nil)
		if tt.path == "" {
			if err == nil {
				t.Errorf("Fill(%q) = %+v, want refused", tt.arg, f)
			}
			continue
		}
		if err != nil || f.Path != tt.path {
			t.Errorf("Fill(%q) = %q, %v; want %q", tt.arg, f.Path, err, tt.path)
			continue
		}
		var fwd string
		if err := json.Unmarshal(f.Forward["u"], &fwd); err != nil || fwd != tt.forward {
			t.Errorf("Fill(%q) forwards %s, want %q", tt.arg, f.Forward["u"], tt.forward)
		}
	}
}
