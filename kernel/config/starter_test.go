package config

import (
	"bytes"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/kernel/example.toml from the embedded starter")

var exampleFile = filepath.Join("..", "..", "testdata", "kernel", "example.toml")

// testdata/kernel/example.toml is the starter that kernel init writes,
// byte for byte: one source, embedded. -update rewrites the example from
// the embedded starter.
func TestExampleIsTheStarter(t *testing.T) {
	if *update {
		if err := os.WriteFile(exampleFile, starter, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, starter) {
		t.Errorf("%s differs from kernel/config/starter.toml; edit the starter and run 'make golden'", exampleFile)
	}
	if !bytes.Contains(starter, starterRoot) {
		t.Errorf("the starter has no %q line for Starter to replace", starterRoot)
	}
}

func TestStarterConfigLoadsWithItsRoot(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, `a "quoted" \ root`)
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "conf", "kernel.toml")
	if err := WriteStarter(file, root); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if c.Root != root {
		t.Errorf("root %q, want %q", c.Root, root)
	}
	for path, want := range map[string]fs.FileMode{file: 0o600, filepath.Dir(file): 0o700} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode().Perm(), err, want)
		}
	}

	// Never over an existing file.
	before, _ := os.ReadFile(file)
	if err := WriteStarter(file, dir); !errors.Is(err, fs.ErrExist) {
		t.Errorf("a second WriteStarter = %v, want fs.ErrExist", err)
	}
	if after, _ := os.ReadFile(file); !bytes.Equal(before, after) {
		t.Error("the second WriteStarter changed the file")
	}
}

func TestStarterWithoutARootStartsNothing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kernel.toml")
	if err := WriteStarter(file, ""); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CheckRoot(c.Root); !errors.Is(err, ErrNoRoot) {
		t.Errorf("CheckRoot of the rootless starter = %v, want ErrNoRoot", err)
	}
	if c.RootRef() == "" {
		t.Error("the empty root has no line to point at")
	}
}
