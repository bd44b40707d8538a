// Package service installs the reference kernel as a per-user service of
// the operating system's own manager: a systemd user unit on Linux, a
// launchd agent on macOS. The manager starts the kernel at login, restarts
// it if it fails, keeps it out of any terminal's reach (a kernel started
// with & dies with its terminal's SIGHUP) and sends SIGHUP itself only to
// reload the config.
//
// Rendering is pure, so the unit files are golden-tested; installing
// writes the file and asks the manager to load it, through a Runner that
// tests replace.
package service

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Names the manager knows the kernel by.
const (
	SystemdUnit = "sharedos-kernel.service"
	LaunchdName = "com.github.sharedos.kernel"
)

// ErrUnsupported is returned on an OS with neither systemd nor launchd
// support here.
var ErrUnsupported = errors.New("no service manager support on this OS")

// Spec is what the service runs: the kernel with a config and a socket,
// both absolute, so the service does not depend on the environment the
// manager gives it.
type Spec struct {
	Executable string // absolute path of sharedos-mcp
	Config     string // absolute path of the kernel config
	Socket     string // absolute path the kernel listens on
	LogFile    string // launchd only: where the kernel's stderr goes
}

func (s Spec) check() error {
	for _, f := range []struct{ name, v string }{{"executable", s.Executable}, {"config", s.Config}, {"socket", s.Socket}} {
		if !filepath.IsAbs(f.v) {
			return fmt.Errorf("service %s %q: want an absolute path", f.name, f.v)
		}
		if strings.ContainsAny(f.v, "\n\r\x00") {
			return fmt.Errorf("service %s %q: a path with a newline or NUL cannot go in a unit file", f.name, f.v)
		}
	}
	return nil
}

func (s Spec) args() []string {
	return []string{s.Executable, "kernel", "--config", s.Config, "--socket", s.Socket}
}

// Platform is where the service goes: the OS and the user's directories.
type Platform struct {
	OS         string // runtime.GOOS
	Home       string
	ConfigHome string // $XDG_CONFIG_HOME; "" means ~/.config
	RuntimeDir string // $XDG_RUNTIME_DIR, where systemctl --user finds the user's manager
	UID        int
}

// UnitPath is the file Install writes.
func (p Platform) UnitPath() (string, error) {
	switch p.OS {
	case "linux":
		dir := p.ConfigHome
		if dir == "" {
			dir = filepath.Join(p.Home, ".config")
		}
		return filepath.Join(dir, "systemd", "user", SystemdUnit), nil
	case "darwin":
		return filepath.Join(p.Home, "Library", "LaunchAgents", LaunchdName+".plist"), nil
	}
	return "", fmt.Errorf("%w (%s)", ErrUnsupported, p.OS)
}

// DefaultLogFile is where a launchd agent's stderr goes.
func (p Platform) DefaultLogFile() string {
	return filepath.Join(p.Home, "Library", "Logs", "sharedos-kernel.log")
}

// Render returns the unit file for s on p's OS.
func (p Platform) Render(s Spec) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	switch p.OS {
	case "linux":
		return renderSystemd(s), nil
	case "darwin":
		if !filepath.IsAbs(s.LogFile) {
			return nil, fmt.Errorf("service log file %q: want an absolute path", s.LogFile)
		}
		return renderLaunchd(s), nil
	}
	return nil, fmt.Errorf("%w (%s)", ErrUnsupported, p.OS)
}

func renderSystemd(s Spec) []byte {
	var b bytes.Buffer
	b.WriteString("# Written by 'sharedos-mcp kernel service install'; remove with 'sharedos-mcp kernel service uninstall'.\n")
	b.WriteString("[Unit]\nDescription=sharedos-mcp reference kernel\n\n")
	b.WriteString("[Service]\nType=simple\nExecStart=")
	for i, a := range s.args() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(systemdQuote(a))
	}
	// SIGHUP reloads the grants; the manager restarts a kernel that
	// fails, but not one that was stopped on purpose.
	b.WriteString("\nExecReload=/bin/kill -HUP $MAINPID\nRestart=on-failure\nRestartSec=2\n\n")
	b.WriteString("[Install]\nWantedBy=default.target\n")
	return b.Bytes()
}

// systemdQuote quotes one ExecStart word: inside double quotes a backslash
// and a quote are escaped, and the specifier and variable characters are
// doubled, since systemd expands % and $ even there.
func systemdQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `%`, `%%`, `$`, `$$`)
	return `"` + r.Replace(s) + `"`
}

func renderLaunchd(s Spec) []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by 'sharedos-mcp kernel service install'; remove with 'sharedos-mcp kernel service uninstall'. -->
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>` + LaunchdName + `</string>
	<key>ProgramArguments</key>
	<array>
`)
	for _, a := range s.args() {
		b.WriteString("\t\t<string>" + xmlEscape(a) + "</string>\n")
	}
	b.WriteString(`	</array>
	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>StandardErrorPath</key>
	<string>` + xmlEscape(s.LogFile) + `</string>
</dict>
</plist>
`)
	return b.Bytes()
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(s)
}

// Runner runs a service manager command and returns its combined output.
type Runner func(name string, args ...string) ([]byte, error)

// ExecRunner runs the command found on PATH.
func ExecRunner(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}

// ManagerError is a service manager command that failed. The unit file
// may still have been written; the command line says what to run by hand.
type ManagerError struct {
	Command []string
	Output  string
	Err     error
}

func (e *ManagerError) Error() string {
	out := strings.TrimSpace(e.Output)
	if out != "" {
		out = ": " + strings.ReplaceAll(out, "\n", " ")
	}
	return fmt.Sprintf("%s failed (%v)%s", strings.Join(e.Command, " "), e.Err, out)
}

func (e *ManagerError) Unwrap() error { return e.Err }

// NoManagerError is a system where no service manager can be asked to
// run the kernel for this user: a container or WSL without systemd, a
// shell with no login session behind it. Install returns it before it
// writes anything.
type NoManagerError struct {
	// Why says so in words.
	Why string
	// Output is what systemctl said, for the curious.
	Output string
	// Linger is set when systemd runs the system, so that
	// 'loginctl enable-linger' gives the user a manager of their own.
	Linger bool
}

func (e *NoManagerError) Error() string { return e.Why }

// running are the words 'systemctl is-system-running' says of a manager
// that takes requests.
var running = []string{"running", "degraded", "starting", "initializing", "maintenance"}

// managerState is the last word a systemctl is-system-running printed;
// its messages (no bus, say) come before it.
func managerState(out []byte) string {
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

// CheckManager asks whether the user's service manager can be reached: a
// *NoManagerError when it cannot, saying why in words. launchd runs on
// every macOS.
func (p Platform) CheckManager(r Runner) error {
	if p.OS != "linux" {
		return nil
	}
	out, err := r("systemctl", "--user", "is-system-running")
	if slices.Contains(running, managerState(out)) {
		return nil
	}
	said := strings.Join(strings.Fields(string(out)), " ")
	if errors.Is(err, exec.ErrNotFound) {
		return &NoManagerError{Why: "systemctl is not installed: this system does not run systemd"}
	}
	sys, _ := r("systemctl", "is-system-running")
	switch {
	case !slices.Contains(running, managerState(sys)):
		return &NoManagerError{Why: "systemd does not run this system (a container, or WSL without systemd), so there is no user service manager", Output: said}
	case p.RuntimeDir == "":
		return &NoManagerError{Why: "systemctl --user cannot find your user service manager: XDG_RUNTIME_DIR is not set (a shell from su or sudo, say)", Output: said, Linger: true}
	}
	return &NoManagerError{Why: "no systemd user manager runs for you (no login session: a shell from ssh without PAM, su, or a container)", Output: said, Linger: true}
}

func (p Platform) run(r Runner, args ...string) error {
	out, err := r(args[0], args[1:]...)
	if err != nil {
		return &ManagerError{Command: args, Output: string(out), Err: err}
	}
	return nil
}

// StartCommands are what Install asks the manager to run, for a user who
// must run them by hand.
func (p Platform) StartCommands(unitPath string) [][]string {
	if p.OS == "darwin" {
		return [][]string{{"launchctl", "bootstrap", p.domain(), unitPath}}
	}
	return [][]string{{"systemctl", "--user", "daemon-reload"}, {"systemctl", "--user", "enable", "--now", SystemdUnit}}
}

func (p Platform) domain() string { return "gui/" + strconv.Itoa(p.UID) }

// StartCommand is the command that starts the installed service now.
func (p Platform) StartCommand() []string {
	if p.OS == "darwin" {
		return []string{"launchctl", "kickstart", p.domain() + "/" + LaunchdName}
	}
	return []string{"systemctl", "--user", "start", SystemdUnit}
}

// Install writes the unit file for s (replacing an earlier one) and asks
// the manager to start it, and returns the unit file's path. Nothing is
// left half-done: where no manager can be asked (*NoManagerError) nothing
// is written, and when the manager refuses (*ManagerError) the file is put
// back as it was.
func (p Platform) Install(s Spec, r Runner) (string, error) {
	unit, err := p.Render(s)
	if err != nil {
		return "", err
	}
	path, err := p.UnitPath()
	if err != nil {
		return "", err
	}
	if err := p.CheckManager(r); err != nil {
		return path, err
	}
	before, err := os.ReadFile(path)
	existed := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return path, fmt.Errorf("read %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if p.OS == "darwin" {
		if err := os.MkdirAll(filepath.Dir(s.LogFile), 0o700); err != nil {
			return "", fmt.Errorf("create %s: %w", filepath.Dir(s.LogFile), err)
		}
		// A loaded agent must be booted out before it is bootstrapped
		// again; one that is not loaded makes this fail, harmlessly.
		_ = p.run(r, "launchctl", "bootout", p.domain()+"/"+LaunchdName)
	}
	if err := writeAtomic(path, unit); err != nil {
		return "", err
	}
	for _, c := range p.StartCommands(path) {
		if err := p.run(r, c...); err != nil {
			return path, errors.Join(err, p.undo(r, path, before, existed))
		}
	}
	return path, nil
}

// undo puts the unit file back as it was before Install, and tells the
// manager.
func (p Platform) undo(r Runner, path string, before []byte, existed bool) error {
	if p.OS != "darwin" && !existed {
		_ = p.run(r, "systemctl", "--user", "disable", SystemdUnit)
	}
	var err error
	if existed {
		err = writeAtomic(path, before)
	} else if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	if p.OS != "darwin" {
		_ = p.run(r, "systemctl", "--user", "daemon-reload")
	}
	return err
}

// Uninstall stops the service and removes its unit file. It reports
// whether there was one to remove. Where no manager runs there is
// nothing to stop or tell, and the file alone is removed.
func (p Platform) Uninstall(r Runner) (removed bool, err error) {
	path, err := p.UnitPath()
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if p.CheckManager(r) != nil {
		if err := os.Remove(path); err != nil {
			return false, fmt.Errorf("remove %s: %w", path, err)
		}
		return true, nil
	}
	// Stopping fails when the service is not loaded, which is fine: the
	// point is that it does not run once the file is gone.
	if p.OS == "darwin" {
		_ = p.run(r, "launchctl", "bootout", p.domain()+"/"+LaunchdName)
	} else {
		_ = p.run(r, "systemctl", "--user", "disable", "--now", SystemdUnit)
	}
	if err := os.Remove(path); err != nil {
		return false, fmt.Errorf("remove %s: %w", path, err)
	}
	if p.OS != "darwin" {
		if err := p.run(r, "systemctl", "--user", "daemon-reload"); err != nil {
			return true, err
		}
	}
	return true, nil
}

// Status is what the manager says of the service.
type Status struct {
	UnitPath  string
	Installed bool   // the unit file exists
	State     string // the manager's word for it ("active", "inactive", "running", ...); "" when it could not be asked
	Detail    string // why State is empty, or the manager's own summary
	Logs      string // how to read the kernel's log
}

// Status asks the manager about the service.
func (p Platform) Status(r Runner) (Status, error) {
	path, err := p.UnitPath()
	if err != nil {
		return Status{}, err
	}
	st := Status{UnitPath: path}
	if _, err := os.Stat(path); err == nil {
		st.Installed = true
	}
	if p.OS == "darwin" {
		st.Logs = "the kernel writes to the file named by StandardErrorPath in " + path
		out, err := r("launchctl", "print", p.domain()+"/"+LaunchdName)
		if err != nil {
			st.State, st.Detail = "not loaded", strings.TrimSpace(string(out))
			return st, nil
		}
		st.State = "loaded"
		for _, line := range strings.Split(string(out), "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), " = "); ok && k == "state" {
				st.State = v
			}
		}
		return st, nil
	}
	st.Logs = "journalctl --user -u " + SystemdUnit
	out, err := r("systemctl", "--user", "is-active", SystemdUnit)
	state := strings.TrimSpace(string(out))
	var ee *exec.ExitError
	switch {
	case err == nil, errors.As(err, &ee) && state != "" && !strings.Contains(state, " "):
		// is-active exits non-zero for inactive and failed units and
		// prints the one-word state either way.
		st.State = state
	default:
		st.Detail = (&ManagerError{Command: []string{"systemctl", "--user", "is-active", SystemdUnit}, Output: state, Err: err}).Error()
	}
	return st, nil
}

func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o644)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
