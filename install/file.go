package install

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Change is one planned edit of a config file: what it holds now and what
// it would hold. Plans read; only Apply writes.
type Change struct {
	Path    string // the file as the harness names it
	Before  []byte // nil when the file does not exist
	After   []byte
	Existed bool
	// ScriptMode is what the install did about the harness's script
	// mode; ScriptModeNone for a harness without one, and for uninstall.
	ScriptMode ScriptModeEdit
}

// Changed reports whether applying the change would alter the file.
func (c Change) Changed() bool {
	return !bytes.Equal(c.Before, c.After) || c.Removes()
}

// Removes reports whether applying the change removes the file: an
// uninstall that leaves nothing in a file install created.
func (c Change) Removes() bool {
	return c.Existed && c.After == nil
}

// Diff returns the change as a unified-style line diff.
func (c Change) Diff() string {
	from, to := c.Path, c.Path
	if !c.Existed {
		from = "/dev/null"
	}
	if c.Removes() {
		to = "/dev/null"
	}
	return Diff(from, to, c.Before, c.After)
}

// PlanInstall reads the harness's file for scope and returns the edit that
// sets our entry to e, and for a harness with a script mode turns it off
// unless opts keep it. A file that does not parse is refused with an
// error naming it and wrapping a *ParseError.
func PlanInstall(h Harness, scope Scope, env Env, e Entry, opts Options) (Change, error) {
	c, err := readPlan(h, scope, env)
	if err != nil {
		return Change{}, err
	}
	c.After, c.ScriptMode, err = h.RenderInstall(c.Before, e, opts)
	if err != nil {
		return Change{}, fmt.Errorf("%s: %w", c.Path, err)
	}
	if !c.Existed && h.createdNote != "" {
		c.After = append([]byte(h.createdNote), c.After...)
	}
	return c, nil
}

// PlanUninstall returns the edit that removes our entry from the
// harness's file for scope. A missing file, or one without our entry, is
// a change that changes nothing.
func PlanUninstall(h Harness, scope Scope, env Env) (Change, error) {
	c, err := readPlan(h, scope, env)
	if err != nil {
		return Change{}, err
	}
	if !c.Existed {
		return c, nil
	}
	c.After, err = h.Remove(c.Before)
	if err != nil {
		return Change{}, fmt.Errorf("%s: %w", c.Path, err)
	}
	if h.createdNote != "" && c.Changed() && string(bytes.TrimSpace(c.After)) == strings.TrimSpace(h.createdNote) {
		// A file install made and nothing else uses: it goes, unless it
		// is a link someone put there.
		if fi, err := os.Lstat(c.Path); err == nil && fi.Mode().IsRegular() {
			c.After = nil
		}
	}
	return c, nil
}

func readPlan(h Harness, scope Scope, env Env) (Change, error) {
	path, err := h.Path(scope, env)
	if err != nil {
		return Change{}, err
	}
	c := Change{Path: path}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Change{}, fmt.Errorf("read %s: %w", path, err)
	default:
		c.Before, c.After, c.Existed = b, b, true
	}
	return c, nil
}

// Installed is what one harness's file for one scope holds of one of
// our entries.
type Installed struct {
	Harness Harness
	Scope   Scope
	Name    string // the entry's name: ServerName, or a further one (EntryName)
	Path    string // "" when the file cannot even be located (Err says why)
	Found   bool   // the file holds the entry
	Entry   Entry  // what the entry runs; Command is "" when it has none
}

// Integration is the name the entry announces to the kernel: its
// --integration value, "" when it has none.
func (in Installed) Integration() string {
	v, _ := in.Entry.Flag("integration")
	return v
}

// Socket is the entry's --socket value, "" when it relies on serve's
// default.
func (in Installed) Socket() string {
	v, _ := in.Entry.Flag("socket")
	return v
}

// Inspect reports whether the harness's file for scope holds our entry
// and what that entry runs. A missing file is not an error: Found is
// false. A file that does not parse is an error wrapping a *ParseError;
// a file that cannot be located is an error with Path "".
func Inspect(h Harness, scope Scope, env Env) (Installed, error) {
	in := Installed{Harness: h, Scope: scope, Name: h.EntryName()}
	c, err := readPlan(h, scope, env)
	in.Path = c.Path
	if err != nil || !c.Existed {
		return in, err
	}
	in.Found, in.Entry, err = h.Find(c.Before)
	if err != nil {
		return in, fmt.Errorf("%s: %w", c.Path, err)
	}
	return in, nil
}

// InspectAll runs Inspect for every harness and scope, in the order
// Harnesses lists them, user scope first: the sharedos entry (Found is
// false when there is none), then each further entry the file holds, in
// its order. errs[i] is Inspect's error for found[i].
func InspectAll(env Env) (found []Installed, errs []error) {
	for _, h := range harnesses {
		for _, scope := range []Scope{ScopeUser, ScopeProject} {
			in, err := Inspect(h, scope, env)
			found = append(found, in)
			errs = append(errs, err)
			if err != nil || in.Path == "" {
				continue
			}
			src, err := os.ReadFile(in.Path)
			if err != nil {
				continue
			}
			names, _ := h.format.names(src)
			for _, name := range names {
				if name == ServerName {
					continue
				}
				in, err := Inspect(h.Named(name), scope, env)
				found = append(found, in)
				errs = append(errs, err)
			}
		}
	}
	return found, errs
}

// Integrations returns the distinct integration names that installed
// entries announce, in InspectAll's order. Files that cannot be read are
// passed over: doctor reports them.
func Integrations(env Env) []string {
	var names []string
	found, _ := InspectAll(env)
	for _, in := range found {
		if n := in.Integration(); in.Found && n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// ErrConcurrentEdit is a file that changed between the plan and Apply.
var ErrConcurrentEdit = errors.New("file changed while it was being edited")

// Apply writes c.After to c.Path atomically: a temporary file in the same
// directory, synced, then renamed over the original, which keeps its
// permissions (a new file is 0600, in directories created 0700). A
// symlinked file is written through to its target. A change that Removes
// the file removes it (the target, for a symlink). If the file no longer
// holds c.Before, nothing is written and the error is ErrConcurrentEdit.
// Apply on an unchanged plan does nothing.
func (c Change) Apply() error {
	if !c.Changed() {
		return nil
	}
	target := c.Path
	if t, err := filepath.EvalSymlinks(c.Path); err == nil {
		target = t
	}
	mode := fs.FileMode(0o600)
	now, err := os.ReadFile(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if c.Existed {
			return fmt.Errorf("write %s: %w", c.Path, ErrConcurrentEdit)
		}
	case err != nil:
		return fmt.Errorf("read %s: %w", c.Path, err)
	default:
		if !c.Existed || !bytes.Equal(now, c.Before) {
			return fmt.Errorf("write %s: %w", c.Path, ErrConcurrentEdit)
		}
		fi, err := os.Stat(target)
		if err != nil {
			return fmt.Errorf("stat %s: %w", c.Path, err)
		}
		mode = fi.Mode().Perm()
	}
	if c.Removes() {
		if err := os.Remove(target); err != nil {
			return fmt.Errorf("remove %s: %w", c.Path, err)
		}
		return nil
	}
	dir := filepath.Dir(target)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return writeAtomic(target, c.After, mode)
}

func writeAtomic(path string, data []byte, mode fs.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err = tmp.Chmod(mode); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp.Name(), err)
	}
	// Make the rename itself durable; a directory that cannot be synced
	// (some filesystems refuse) still holds the new file.
	if d, derr := os.Open(filepath.Dir(path)); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
