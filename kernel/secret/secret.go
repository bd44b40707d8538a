// Package secret holds the credentials the reference kernel keeps for its
// upstreams and its telemetry: the [[secret]] tables of its config, each
// a name and exactly one source (a private file, a command's output, or a
// variable of the kernel's own environment). It puts them where a config
// names them ({secret:NAME}, which the kernel expands in an upstream's env
// and headers values and in [telemetry]'s headers only) and keeps them out
// of every output (Redactor).
//
// A secret's value never appears in an error of this package: errors name
// the secret and its source (a path, a program, a variable name), never
// what was read.
package secret

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/privfile"
)

// Config is one [[secret]] table as the kernel's TOML config holds it.
// Exactly one of File, Command and Env is set.
type Config struct {
	Name    string   `toml:"name"`
	File    string   `toml:"file"`    // a file owned by the kernel's uid that no one else can read; "~/" is the home directory, a relative path is the config file's directory's
	Command []string `toml:"command"` // a program and its arguments; its trimmed stdout is the value
	Env     string   `toml:"env"`     // a variable of the kernel's own environment
}

// Kind is where a secret's value comes from.
type Kind string

// The kinds of source.
const (
	KindFile    Kind = "file"
	KindCommand Kind = "command"
	KindEnv     Kind = "env"
)

// Spec is a checked [[secret]]: its name and its one source.
type Spec struct {
	Name    string
	Kind    Kind
	File    string   // KindFile: an absolute path
	Command []string // KindCommand
	Env     string   // KindEnv
}

// Source says where the value comes from, for kernel check and errors:
// "file /home/me/.config/sharedos/secrets/github", "command pass show
// github", "env GITHUB_TOKEN". It never holds a value.
func (s *Spec) Source() string {
	switch s.Kind {
	case KindFile:
		return "file " + s.File
	case KindCommand:
		return "command " + strings.Join(s.Command, " ")
	default:
		return "env " + s.Env
	}
}

// Bounds of a value.
const (
	// MinLength is the shortest value accepted. A shorter one would match
	// ordinary text, so the Redactor could not keep it out of outputs
	// without mangling them.
	MinLength = 8
	// MaxLength is the longest value accepted, and the most a file or a
	// command's stdout is read.
	MaxLength = 64 << 10
	// DefaultCommandTimeout bounds a command secret's run.
	DefaultCommandTimeout = 30 * time.Second
)

// ConfigError is a problem with one [[secret]] table (Index counts from 0
// in the order the tables appear) and the key it is about ("" for the
// table as a whole).
type ConfigError struct {
	Index int
	Key   string
	Err   error
}

func (e *ConfigError) Error() string {
	where := fmt.Sprintf("secret #%d", e.Index+1)
	if e.Key != "" {
		where += " " + e.Key
	}
	return where + ": " + e.Err.Error()
}

func (e *ConfigError) Unwrap() error { return e.Err }

// Errors of Parse.
var (
	ErrInvalidName   = errors.New("a name must be 1-64 of A-Z, a-z, 0-9, '-', '_', '.'")
	ErrDuplicateName = errors.New("another secret already has this name")
	ErrNoSource      = errors.New("a secret needs exactly one of file, command or env")
	ErrManySources   = errors.New("a secret takes exactly one of file, command or env, not several")
)

// Parse checks the [[secret]] tables of a config and returns their specs,
// in order. base is the directory of the config file (a relative file is
// taken from it); home is the kernel's home directory, for "~/". The first
// problem found is returned as a *ConfigError. Nothing is read or run.
func Parse(cfgs []Config, base, home string) ([]Spec, error) {
	specs := make([]Spec, 0, len(cfgs))
	seen := map[string]bool{}
	for i, c := range cfgs {
		fail := func(key string, err error) ([]Spec, error) {
			return nil, &ConfigError{Index: i, Key: key, Err: err}
		}
		switch {
		case !ValidName(c.Name):
			return fail("name", fmt.Errorf("%q: %w", c.Name, ErrInvalidName))
		case seen[c.Name]:
			return fail("name", fmt.Errorf("%q: %w", c.Name, ErrDuplicateName))
		}
		seen[c.Name] = true
		n := 0
		for _, set := range []bool{c.File != "", c.Command != nil, c.Env != ""} {
			if set {
				n++
			}
		}
		switch {
		case n == 0:
			return fail("", ErrNoSource)
		case n > 1:
			return fail("", ErrManySources)
		}
		s := Spec{Name: c.Name}
		switch {
		case c.File != "":
			p, err := filePath(c.File, base, home)
			if err != nil {
				return fail("file", err)
			}
			s.Kind, s.File = KindFile, p
		case c.Command != nil:
			if len(c.Command) == 0 || c.Command[0] == "" {
				return fail("command", errors.New("the command must name a program"))
			}
			for _, a := range c.Command {
				if strings.ContainsRune(a, 0) {
					return fail("command", errors.New("an argument contains NUL"))
				}
			}
			s.Kind, s.Command = KindCommand, slices.Clone(c.Command)
		default:
			if strings.ContainsAny(c.Env, "=\x00") {
				return fail("env", fmt.Errorf("%q: a variable name cannot hold '=' or NUL", c.Env))
			}
			s.Kind, s.Env = KindEnv, c.Env
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// ValidName reports whether s can name a secret, and so appear in
// {secret:s}.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// filePath makes a configured path absolute: "~" and "~/..." from home, a
// relative one from base.
func filePath(p, base, home string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", errors.New("the path contains NUL")
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home == "" {
			return "", fmt.Errorf("%s: no home directory is known for ~", p)
		}
		return filepath.Join(home, p[1:]), nil
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	if base == "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
		return abs, nil
	}
	return filepath.Join(base, p), nil
}

// Options configure Load and Check. Zero fields take the kernel's own.
type Options struct {
	// UID must own every secret file; 0 is the kernel's own uid (which is
	// 0 when the kernel runs as root).
	UID int
	// LookupEnv reads the kernel's environment for env secrets; nil is
	// os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Environ is a command secret's environment; nil is the kernel's
	// (os.Environ): keychains and password managers find their agents
	// through it.
	Environ []string
	// Dir is where commands run; "" is the kernel's working directory.
	Dir string
	// CommandTimeout bounds each command; 0 is DefaultCommandTimeout.
	CommandTimeout time.Duration
}

func (o *Options) uid() int {
	if o.UID != 0 {
		return o.UID
	}
	return os.Getuid()
}

func (o *Options) lookupEnv(k string) (string, bool) {
	if o.LookupEnv != nil {
		return o.LookupEnv(k)
	}
	return os.LookupEnv(k)
}

// Error is a secret that could not be loaded, or that Check refuses. Its
// text names the secret and its source, never a value.
type Error struct {
	Name   string
	Source string // Spec.Source()
	Err    error
	// Fix is what to do about it, when there is one thing to do (for a
	// file with loose permissions, "chmod 600 FILE"): the command layer's
	// hint.
	Fix string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("secret %q (%s): %v", e.Name, e.Source, e.Err)
	if e.Fix != "" {
		msg += "; fix it with: " + e.Fix
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errors a *Error wraps, besides fs.ErrNotExist and exec.ErrNotFound.
var (
	ErrLoosePermissions = privfile.ErrLoosePermissions
	ErrNotOwned         = privfile.ErrNotOwned
	ErrNotRegular       = errors.New("it is not a regular file")
	ErrEnvUnset         = errors.New("the kernel's environment does not set it")
	ErrCommandFailed    = errors.New("the command failed")
	ErrCommandTimeout   = errors.New("the command did not finish in time")
	ErrEmpty            = errors.New("the value is empty")
	ErrTooShort         = fmt.Errorf("the value is shorter than %d bytes, too short to be told apart from other text and kept out of outputs", MinLength)
	ErrTooLong          = fmt.Errorf("the value is longer than %d bytes", MaxLength)
	ErrNUL              = errors.New("the value contains NUL")
)

// Load reads or runs the source of every spec, in order, each once, and
// returns the values as a Set. Every secret that cannot be loaded is a
// *Error; Load returns the ones that could be loaded together with all of
// those errors (joined), so kernel check can report each. The kernel
// refuses to start, or to apply a reload, on any error. ctx bounds the
// commands together.
func Load(ctx context.Context, specs []Spec, opts Options) (*Set, error) {
	set := &Set{values: map[string]string{}, specs: slices.Clone(specs)}
	var errs []error
	for i := range specs {
		s := &specs[i]
		v, err := load(ctx, s, &opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		set.values[s.Name] = v
	}
	return set, errors.Join(errs...)
}

func load(ctx context.Context, s *Spec, opts *Options) (string, error) {
	var raw []byte
	var err error
	switch s.Kind {
	case KindFile:
		raw, err = readFile(s.File, opts.uid())
		if errors.Is(err, ErrLoosePermissions) {
			return "", &Error{Name: s.Name, Source: s.Source(), Err: err, Fix: "chmod 600 " + s.File}
		}
	case KindCommand:
		raw, err = runCommand(ctx, s.Command, opts)
	case KindEnv:
		v, ok := opts.lookupEnv(s.Env)
		if !ok {
			err = ErrEnvUnset
		}
		raw = []byte(v)
	default:
		err = fmt.Errorf("unknown kind %q", s.Kind)
	}
	if err == nil {
		var v string
		if v, err = checkValue(raw); err == nil {
			return v, nil
		}
	}
	return "", &Error{Name: s.Name, Source: s.Source(), Err: err}
}

// checkValue trims a value read and says what is wrong with it, if
// anything.
func checkValue(raw []byte) (string, error) {
	if len(raw) > MaxLength {
		return "", ErrTooLong
	}
	v := string(bytes.TrimSpace(raw))
	switch {
	case v == "":
		return "", ErrEmpty
	case len(v) < MinLength:
		return "", ErrTooShort
	case strings.IndexByte(v, 0) >= 0:
		return "", ErrNUL
	}
	return v, nil
}

// Check says what Load would refuse without running anything: a file that
// is missing, not the kernel's uid's or readable by others, a command whose
// program is not on PATH, an env variable that is unset. It reads a file
// secret (to check its value) but does not run a command secret, whose
// program may prompt or cost. Every problem is a *Error, joined.
func Check(specs []Spec, opts Options) error {
	var errs []error
	for i := range specs {
		s := &specs[i]
		switch s.Kind {
		case KindCommand:
			if _, err := exec.LookPath(s.Command[0]); err != nil {
				errs = append(errs, &Error{Name: s.Name, Source: s.Source(), Err: lookPathError(s.Command[0], err)})
			}
		default:
			if _, err := load(context.Background(), s, &opts); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// readFile reads a secret file that only uid may read: opened without
// blocking (a FIFO is refused, not waited on), then checked on what was
// opened, so a file swapped in after a check is not read.
func readFile(path string, uid int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, pe.Err // the path is already the Error's Source
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, ErrNotRegular
	}
	if err := privfile.Check(fi, uid, 0o077); err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(f, MaxLength+1))
}

// runCommand runs a command secret in a process group of its own, with
// stdin closed and within the timeout, and returns its stdout. What it
// writes on stderr is counted, never kept: a keychain tool may print the
// secret there (security find-generic-password -g does).
func runCommand(ctx context.Context, argv []string, opts *Options) ([]byte, error) {
	timeout := opts.CommandTimeout
	if timeout <= 0 {
		timeout = DefaultCommandTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, lookPathError(argv[0], err)
	}
	cmd := exec.CommandContext(ctx, prog, argv[1:]...)
	cmd.Env = opts.Environ
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Dir = opts.Dir
	var stdout boundedBuffer
	var stderr countingWriter
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A password manager is often a script that starts others (pass
	// starts gpg): the timeout ends the whole group, and pipes a
	// descendant still holds are not waited on for long.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%w: no result within %v", ErrCommandTimeout, timeout)
	case err != nil:
		var ee *exec.ExitError
		how := "it could not be run"
		if errors.As(err, &ee) {
			how = ee.ProcessState.String()
		}
		msg := fmt.Errorf("%w: %s", ErrCommandFailed, how)
		if stderr.n > 0 {
			msg = fmt.Errorf("%w; it wrote %d bytes on stderr, not shown because they could hold the secret: run the command yourself to read them", msg, stderr.n)
		}
		return nil, msg
	case stdout.over:
		return nil, ErrTooLong
	}
	return stdout.buf, nil
}

func lookPathError(prog string, err error) error {
	if errors.Is(err, exec.ErrNotFound) {
		return fmt.Errorf("%s: %w", prog, exec.ErrNotFound)
	}
	return fmt.Errorf("%s: %w", prog, err)
}

// boundedBuffer keeps the first MaxLength+1 bytes written to it and
// notes that more came; it never fails a write, so the command is not
// stopped by a broken pipe halfway through.
type boundedBuffer struct {
	buf  []byte
	over bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := MaxLength + 1 - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	if len(b.buf) > MaxLength {
		b.over = true
	}
	return len(p), nil
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}
