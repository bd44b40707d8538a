package kernel

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/sharedos/sharedos-mcp/policy"
)

// Config is what the kernel serves and to whom. Flags override the file's
// values before the kernel starts.
type Config struct {
	Socket    string         // "" means sockpath.Default
	AuditLog  string         // "" means DefaultAuditPath
	AllowUIDs []uint32       // nil means the kernel's own uid
	Root      string         // the files root, absolute
	Grants    []policy.Grant // deny by default: only these allow anything
	// AllowHardLinks serves regular files with more than one name; see
	// Server.AllowHardLinks.
	AllowHardLinks bool
}

// fileConfig is the TOML document. Unknown keys are an error, so a typo in
// a grant cannot silently widen or narrow what is allowed.
type fileConfig struct {
	Socket    string   `toml:"socket"`
	AuditLog  string   `toml:"audit_log"`
	AllowUIDs []uint32 `toml:"allow_uids"`
	Files     struct {
		Root           string `toml:"root"`
		AllowHardLinks bool   `toml:"allow_hard_links"`
	} `toml:"files"`
	Grant []fileGrant `toml:"grant"`
}

type fileGrant struct {
	Subject     string   `toml:"subject"`
	Resource    string   `toml:"resource"`
	Descendants bool     `toml:"descendants"`
	Actions     []string `toml:"actions"`
	// any, so that a local date-time (no offset, ambiguous across time
	// zones) can be told apart from an offset one and refused.
	Expires any `toml:"expires"`
}

// DefaultConfig serves root read-only (read, list, search, everything
// beneath it) to every integration: the quickstart with no --config.
func DefaultConfig(root string) Config {
	return Config{
		Root: root,
		Grants: []policy.Grant{{
			Subject:     policy.SubjectWildcard,
			Resource:    policy.Resource{Namespace: "files", Path: "/"},
			Descendants: true,
			Actions:     []string{policy.ActionRead, policy.ActionList, policy.ActionSearch},
		}},
	}
}

// LoadConfig reads and validates a TOML config file. Errors name the file
// and, for anything the decoder saw, the line and column. Relative paths
// in the file are taken relative to the file's directory, not to wherever
// the kernel happens to be started.
func LoadConfig(file string) (Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	c, err := ParseConfig(file, data)
	if err != nil {
		return Config{}, err
	}
	base := filepath.Dir(file)
	for _, p := range []*string{&c.Socket, &c.AuditLog, &c.Root} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(base, *p)
		}
	}
	return c, nil
}

// ParseConfig decodes and validates a config document; name is used in
// error messages. The root is made absolute but not checked on disk:
// CheckRoot does that once flags have had their say.
func ParseConfig(name string, data []byte) (Config, error) {
	var fc fileConfig
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return Config{}, decodeError(name, err)
	}
	c := Config{Socket: fc.Socket, AuditLog: fc.AuditLog, AllowUIDs: fc.AllowUIDs, Root: fc.Files.Root, AllowHardLinks: fc.Files.AllowHardLinks}
	if fc.AllowUIDs != nil && len(fc.AllowUIDs) == 0 {
		return Config{}, fmt.Errorf("%s: allow_uids is empty, so no one could connect; remove it to serve your own uid", name)
	}
	for i, g := range fc.Grant {
		where := fmt.Sprintf("%s: grant #%d", name, i+1)
		r, err := policy.ParseResource(g.Resource)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", where, err)
		}
		pg := policy.Grant{Subject: g.Subject, Resource: r, Descendants: g.Descendants, Actions: g.Actions}
		if err := pg.Validate(); err != nil {
			return Config{}, fmt.Errorf("%s: %w", where, err)
		}
		switch e := g.Expires.(type) {
		case nil:
		case time.Time:
			pg.Expires = e
		default:
			return Config{}, fmt.Errorf("%s: expires must be a date-time with an offset, e.g. 2027-01-01T00:00:00Z", where)
		}
		c.Grants = append(c.Grants, pg)
	}
	return c, nil
}

// decodeError turns go-toml's errors into one line per problem, each with
// file:line:column, so the user can jump to it.
func decodeError(name string, err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		var lines []string
		for i := range strict.Errors {
			de := &strict.Errors[i]
			row, col := de.Position()
			lines = append(lines, fmt.Sprintf("%s:%d:%d: unknown key %q", name, row, col, strings.Join(de.Key(), ".")))
		}
		return errors.New(strings.Join(lines, "; "))
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if k := de.Key(); len(k) > 0 {
			msg = strings.Join(k, ".") + ": " + msg
		}
		return fmt.Errorf("%s:%d:%d: %s", name, row, col, msg)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// CheckRoot makes root absolute and checks it is an existing directory.
func CheckRoot(root string) (string, error) {
	if root == "" {
		return "", errors.New("no files root: set [files] root in the config or pass --root")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("files root: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("files root: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("files root %s is not a directory", abs)
	}
	return abs, nil
}
