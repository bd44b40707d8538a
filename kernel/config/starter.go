package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// starter is the commented config `kernel init` writes. It is also
// testdata/kernel/example.toml byte for byte (TestExampleIsTheStarter),
// whose root, demo-root beside it, is what the demo and the tests serve.
//
//go:embed starter.toml
var starter []byte

// starterRoot is the one line Starter replaces.
var starterRoot = []byte("\nroot = \"demo-root\"\n")

// Starter returns the starter config with its files root set to
// root. With root "" the key is left empty, with a note to set it: the
// kernel refuses to start on it until it is set (or --root is given), so
// nothing is shared before someone says what.
func Starter(root string) []byte {
	line := "\nroot = " + tomlQuote(root) + "\n"
	if root == "" {
		line = "\n# Set this to the directory to share, e.g. root = \"~/work\".\nroot = \"\"\n"
	}
	return bytes.Replace(starter, starterRoot, []byte(line), 1)
}

// WriteStarter writes Starter(root) to path, creating its directory
// (mode 0700). It never replaces a file: when path exists, the error
// wraps fs.ErrExist and nothing is written.
func WriteStarter(path, root string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create config directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create config: %w", err)
	}
	_, err = f.Write(Starter(root))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(fmt.Errorf("write config %s: %w", path, err), os.Remove(path))
	}
	return nil
}

// tomlQuote writes s as a TOML basic string.
func tomlQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
