package upstream

import (
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-mcp/policy"
)

// TestTheSchemaSaysWhenAPlaceholdersArgumentTakesAPathOrAURL: what a
// published tool's input schema holds for each placeholder's argument,
// and whether it reads as a path or a URL: by its format, by its name
// (server-filesystem's path, a file_path, a sourceDir, a url) or by its
// description; a description that only mentions a file, and arguments
// that are neither (an owner, a query), do not.
func TestTheSchemaSaysWhenAPlaceholdersArgumentTakesAPathOrAURL(t *testing.T) {
	str := func(more ...string) map[string]any {
		p := map[string]any{"type": "string"}
		for i := 0; i+1 < len(more); i += 2 {
			p[more[i]] = more[i+1]
		}
		return p
	}
	for _, c := range []struct {
		resource string
		prop     map[string]any
		want     Argument
	}{
		{"/{path}", str(), Argument{Takes: TakesPath, By: "name"}},
		{"/{file_path}", str(), Argument{Takes: TakesPath, By: "name"}},
		{"/{sourceDir}", str(), Argument{Takes: TakesPath, By: "name"}},
		{"/{target}", str("format", "path"), Argument{Takes: TakesPath, By: "format", Format: "path"}},
		{"/{target}", str("description", "Absolute path of the file to write"), Argument{Takes: TakesPath, By: "description"}},
		{"/{text}", str("description", "The text to write into the file"), Argument{}},
		{"/{url}", str(), Argument{Takes: TakesURL, By: "name"}},
		{"/{targetURL}", str(), Argument{Takes: TakesURL, By: "name"}},
		{"/{target}", str("format", "uri"), Argument{Takes: TakesURL, By: "format", Format: "uri"}},
		{"/{page}", str("description", "The URL to fetch"), Argument{Takes: TakesURL, By: "description"}},
		{"/repos/{owner}", str("description", "The owner of the repository"), Argument{}},
		{"/{path:path}", str(), Argument{Kind: policy.KindPath, Takes: TakesPath, By: "name"}},
		{"/{u:url}", str("format", "uri"), Argument{Kind: policy.KindURL, Takes: TakesURL, By: "format", Format: "uri"}},
	} {
		tmpl, err := policy.ParseTemplate(c.resource)
		if err != nil {
			t.Fatal(err)
		}
		name := tmpl.Placeholders()[0].Name
		spec := mustSpec(t, "[[upstream]]\nname = \"fs\"\ncommand = [\"x\"]\n[[upstream.tool]]\nname = \"t\"\naction = \"read\"\nresource = \""+c.resource+"\"\n")
		ls := judge(&spec, []*mcp.Tool{tool("t", "A tool.", map[string]any{name: c.prop})})
		if len(ls) != 1 || ls[0].tool == nil {
			t.Fatalf("%s: not published: %+v", c.resource, ls[0].withheld)
		}
		want := c.want
		want.Name = name
		if got := ls[0].tool.Arguments; !reflect.DeepEqual(got, []Argument{want}) {
			t.Errorf("%s %v: Arguments = %+v, want %+v", c.resource, c.prop, got, want)
		}
	}
}
