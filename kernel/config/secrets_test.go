package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/kernel/secret"
)

func TestSecretsAreCheckedAndTheirPathsResolved(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := t.TempDir()
	file := filepath.Join(dir, "k.toml")
	doc := `
[[secret]]
name = "github-token"
file = "~/.config/sharedos/secrets/github"

[[secret]]
name = "linear-client"
command = ["pass", "show", "linear"]

[[secret]]
name = "memory"
file = "secrets/memory"

[[secret]]
name = "unused"
env = "SOME_TOKEN"

[[upstream]]
name = "github"
url = "https://api.githubcopilot.com/mcp/"
headers = { Authorization = "Bearer {secret:github-token}" }
ca_file = "~/ca.pem"

[[upstream]]
name = "linear"
url = "https://mcp.linear.app/mcp"
auth = "oauth"
client_id = "sharedos"
client_secret = "{secret:linear-client}"

[[upstream]]
name = "memory"
command = ["server-memory"]
env = { TOKEN = "{secret:memory}", ALSO = "{secret:github-token}" }

[telemetry]
otlp_endpoint = "https://otlp.example"
headers = { authorization = "Bearer {secret:github-token}", x-team = "{secret:memory}-{secret:memory}" }
`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	want := []secret.Spec{
		{Name: "github-token", Kind: secret.KindFile, File: filepath.Join(home, ".config/sharedos/secrets/github")},
		{Name: "linear-client", Kind: secret.KindCommand, Command: []string{"pass", "show", "linear"}},
		{Name: "memory", Kind: secret.KindFile, File: filepath.Join(dir, "secrets/memory")},
		{Name: "unused", Kind: secret.KindEnv, Env: "SOME_TOKEN"},
	}
	if !reflect.DeepEqual(c.Secrets, want) {
		t.Errorf("Secrets = %+v\nwant %+v", c.Secrets, want)
	}
	if got := c.Upstreams[0].Remote.CAFile; got != filepath.Join(home, "ca.pem") {
		t.Errorf("ca_file = %q, want ~ expanded", got)
	}
	users := c.SecretUsers()
	wantUsers := map[string][]string{"github-token": {"github", "memory", "[telemetry]"}, "linear-client": {"linear"}, "memory": {"memory", "[telemetry]"}}
	if !reflect.DeepEqual(users, wantUsers) {
		t.Errorf("SecretUsers = %v, want %v", users, wantUsers)
	}
}

func TestSecretProblemsNameTheirLine(t *testing.T) {
	const up = "[[upstream]]\nname = \"gh\"\nurl = \"https://mcp.example/\"\n"
	tests := []struct{ name, doc, want string }{
		{"a reference to no secret", up + "headers = { Authorization = \"Bearer {secret:github}\" }\n",
			`c.toml:4:1: upstream #1 headers: {secret:github}: no [[secret]] has this name`},
		{"a reference in env to no secret", "[[secret]]\nname = \"a-token\"\nenv = \"A\"\n[[upstream]]\nname = \"m\"\ncommand = [\"x\"]\nenv = { T = \"{secret:b-token}\" }\n",
			`c.toml:7:1: upstream #1 env: {secret:b-token}: no [[secret]] has this name`},
		{"a client secret naming no secret", up + "auth = \"oauth\"\nclient_id = \"c\"\nclient_secret = \"{secret:cs}\"\n",
			`c.toml:6:1: upstream #1 client_secret: {secret:cs}: no [[secret]] has this name`},
		{"a telemetry header naming no secret", "[[secret]]\nname = \"a-token\"\nenv = \"A\"\n\n[telemetry]\nheaders = { authorization = \"Bearer {secret:a-token} {secret:otlp}\" }\n",
			`c.toml:5: [telemetry] headers: authorization: {secret:otlp}: no [[secret]] has this name`},
		{"a telemetry header with a malformed reference", "[telemetry]\nheaders = { authorization = \"Bearer {secret:two words}\" }\n",
			`c.toml:1: [telemetry] headers: authorization: a reference is {secret:NAME}`},
		{"a secret with two sources", up + "\n[[secret]]\nname = \"t\"\nenv = \"T\"\nfile = \"/t\"\n",
			`c.toml:5: secret #1: a secret takes exactly one of file, command or env, not several`},
		{"a secret named twice", "[[secret]]\nname = \"t\"\nenv = \"T\"\n[[secret]]\nname = \"t\"\nenv = \"U\"\n",
			`c.toml:4: secret #2 name: "t": another secret already has this name`},
		{"a misspelt source", "[[secret]]\nname = \"t\"\nfiel = \"/t\"\n", `c.toml:3:1: unknown key "secret.fiel"`},
		{"a command that is not an array", "[[secret]]\nname = \"t\"\ncommand = \"pass show t\"\n", `want an array of strings, e.g. command = ["pass", "show", "github"]`},
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
