package main

import (
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// sourceFacts is what the module's source holds of the code the budgets
// forbid or confine: assembly, unsafe, and memory mapped by hand.
type sourceFacts struct {
	scanned bool
	asm     []string // .s files
	unsafe  []string // non-test Go files that import unsafe
	// unsafeNoSyscall are those of them that make no system call (import
	// neither syscall nor golang.org/x/sys/unix): unsafe there is not at
	// a system call.
	unsafeNoSyscall []string
	mmap            []string // non-test Go files outside bench/ that call Mmap
}

// scanSource reads the module under root, skipping what is not the
// module's own code (dependencies, test data, the VCS).
func scanSource(root string) (sourceFacts, error) {
	var f sourceFacts
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "dist":
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".s"):
			f.asm = append(f.asm, rel)
		case strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
			return f.readGo(path, rel)
		}
		return nil
	})
	f.scanned = err == nil
	return f, err
}

func (f *sourceFacts) readGo(path, rel string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	file, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
	if err != nil {
		return err
	}
	var imports []string
	for _, im := range file.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		imports = append(imports, p)
	}
	if slices.Contains(imports, "unsafe") {
		f.unsafe = append(f.unsafe, rel)
		if !slices.Contains(imports, "syscall") && !slices.Contains(imports, "golang.org/x/sys/unix") {
			f.unsafeNoSyscall = append(f.unsafeNoSyscall, rel)
		}
	}
	if !strings.HasPrefix(rel, "bench"+string(filepath.Separator)) && bytes.Contains(src, []byte("Mmap(")) {
		f.mmap = append(f.mmap, rel)
	}
	return nil
}

// sourceList names files for the table: "none", or how many and which.
func sourceList(files []string) string {
	if len(files) == 0 {
		return "none"
	}
	return strconv.Itoa(len(files)) + ": " + strings.Join(files, ", ")
}
