// Package doctor checks, one line each, what serve needs to work for a
// harness: this binary, the kernel socket and the directories above it,
// the kernel's peer credentials, integration.hello and the catalogue, and
// every harness's configuration. It also says, the same way for every
// command, what a failed connection to the kernel means and how to fix it.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sharedos/sharedos-mcp/install"
	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/peercred"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
	"github.com/sharedos/sharedos-mcp/kernelclient"
)

const prog = "sharedos-mcp"

// HelloTimeout bounds the wait for the kernel's answer to hello; a kernel
// that accepts but never answers must not leave anyone hanging.
const HelloTimeout = 10 * time.Second

// Options is what to check.
type Options struct {
	// Socket is the kernel socket to check and From says where that
	// choice came from (see SocketChoice).
	Socket, From string
	// Integration, when set, is the one integration whose hello and
	// catalogue are checked. When empty, each integration an installed
	// harness entry names is checked; with none installed, hello is
	// checked as "doctor".
	Integration string
	// KernelUID is one more uid the kernel may run as, as given to serve;
	// -1 for none.
	KernelUID int
	// Version is this binary's version.
	Version string
	// Env is where the harness configurations are looked up; its Getenv
	// is also the environment serve's socket default is computed from.
	Env install.Env
	// Upstreams, when set, are the brokered servers of the kernel's
	// config, whose states and unpublished tools are checked too.
	Upstreams *Upstreams
	// Grants, when set, are the kernel config's grants: an installed
	// entry whose integration no grant names gets a warning.
	Grants *Grants
	// Start is the command that starts a kernel on Socket, for the fix
	// of a kernel that is not running.
	Start string
}

// Grants is what doctor knows of the kernel config's grants.
type Grants struct {
	Config   string   // the config file
	Named    []string // the integrations a grant's subject names
	Wildcard bool     // a grant's subject is integration:*
}

// Run prints every check to w and returns how many found a problem.
func Run(ctx context.Context, w io.Writer, opts Options) int {
	d := &doctor{out: w, opts: opts}
	exe := d.binary()
	entries, errs := install.InspectAll(opts.Env)
	d.kernel(ctx, d.integrations(entries), kernelclient.Options{Socket: opts.Socket, KernelUID: opts.KernelUID})
	if opts.Upstreams != nil {
		d.upstreams(opts.Upstreams)
	}
	d.harnesses(entries, errs, exe)
	return d.problems
}

// integrationCheck is one integration to say hello as, and the installed
// entries that name it.
type integrationCheck struct {
	name string
	by   []string // "claude-code user", …
	// installed: a harness runs it, so an empty catalogue is a problem.
	installed bool
}

// integrations lists what to say hello as: the one asked for, else each
// integration an installed entry names, else "doctor".
func (d *doctor) integrations(entries []install.Installed) []integrationCheck {
	var checks []integrationCheck
	for i, in := range entries {
		name := in.Integration()
		if !in.Found || name == "" || (d.opts.Integration != "" && name != d.opts.Integration) || sameFileAs(entries, i) >= 0 {
			continue
		}
		label := in.Harness.ID + " " + string(in.Scope)
		if i := slices.IndexFunc(checks, func(c integrationCheck) bool { return c.name == name }); i >= 0 {
			checks[i].by = append(checks[i].by, label)
			continue
		}
		checks = append(checks, integrationCheck{name: name, by: []string{label}, installed: true})
	}
	switch {
	case d.opts.Integration != "" && len(checks) == 0:
		// Asked for by name: a harness may be configured by hand.
		checks = []integrationCheck{{name: d.opts.Integration, installed: true}}
	case len(checks) == 0:
		checks = []integrationCheck{{name: "doctor"}}
	}
	return checks
}

// doctor prints one line per check and counts the problems.
type doctor struct {
	out      io.Writer
	opts     Options
	problems int
	shown    map[string]bool // brokered tools already reported
}

func (d *doctor) ok(format string, args ...any) {
	fmt.Fprintf(d.out, "ok      "+format+"\n", args...)
}

// skip reports a check that does not apply: nothing installed, or an
// earlier problem makes it meaningless.
func (d *doctor) skip(format string, args ...any) {
	fmt.Fprintf(d.out, "-       "+format+"\n", args...)
}

// note reports what is neither right nor wrong but worth knowing.
func (d *doctor) note(format string, args ...any) {
	fmt.Fprintf(d.out, "note    "+format+"\n", args...)
}

func (d *doctor) problem(what, fix string) {
	d.problems++
	fmt.Fprintf(d.out, "problem %s\n  fix: %s\n", what, fix)
}

// warning reports what is likely a mistake but may be meant; it is not
// counted as a problem.
func (d *doctor) warning(what, fix string) {
	fmt.Fprintf(d.out, "warning %s\n  fix: %s\n", what, fix)
}

// binary reports this binary and returns its path with symlinks
// resolved, the form install writes; "" when it cannot be found.
func (d *doctor) binary() string {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		d.problem("cannot locate this binary: "+cli.Words(err), "run sharedos-mcp by its installed path")
		return ""
	}
	d.ok("%s %s at %s", prog, d.opts.Version, exe)
	return exe
}

// SocketChoice returns the socket serve would use and where that choice
// came from, in sockpath.Default's order.
func SocketChoice(flagValue string, getenv func(string) string) (path, from string) {
	switch {
	case flagValue != "":
		return flagValue, "--socket"
	case getenv("SHAREDOS_SOCKET") != "":
		from = "$SHAREDOS_SOCKET"
	case getenv("XDG_RUNTIME_DIR") != "":
		from = "$XDG_RUNTIME_DIR"
	default:
		from = "the default, as neither $SHAREDOS_SOCKET nor $XDG_RUNTIME_DIR is set"
	}
	return sockpath.Default(getenv), from
}

// kernel checks the socket, the connection and the kernel's credentials,
// then hello and the catalogue once per integration, each a turn of its
// own; it stops at the first check that fails, since each needs the one
// before.
func (d *doctor) kernel(ctx context.Context, checks []integrationCheck, opts kernelclient.Options) {
	path, from := opts.Socket, d.opts.From
	if err := sockpath.CheckLen(path); err != nil {
		d.problem(fmt.Sprintf("socket %s (from %s): %s", path, from, cli.Words(err)), "use a shorter socket path, e.g. under $XDG_RUNTIME_DIR, for the kernel and serve alike")
		d.skip("kernel checks skipped: no usable socket path")
		return
	}
	d.ok("socket %s (from %s): its path is %s long, within the %d a socket path may have here", path, from, cli.Count(len(path), "byte", "bytes"), sockpath.MaxLen())
	if !d.socketFile(path, opts.Trusted) {
		d.skip("kernel checks skipped: no usable socket")
		return
	}

	// Dial reads the credentials through this hook, which also tells a
	// failed connect from a refused peer without a second connection.
	var (
		cred      peercred.Cred
		credErr   error
		connected bool
	)
	first := opts
	first.PeerCred = func(c *net.UnixConn) (peercred.Cred, error) {
		connected = true
		cred, credErr = peercred.Get(c)
		return cred, credErr
	}
	k, err := kernelclient.Dial(first)
	switch {
	case err != nil && !connected:
		fix := "start a kernel: " + d.opts.Start
		why := cli.Words(err)
		var se *os.SyscallError
		if errors.As(err, &se) {
			why = se.Err.Error() // the socket is named already
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			fix = "nothing listens on this socket; a kernel that stopped uncleanly left it behind. " + fix + " (it replaces the stale socket)"
		}
		d.problem(fmt.Sprintf("kernel not reachable at %s: %s", path, why), fix)
		return
	case credErr != nil:
		d.ok("kernel reachable at %s", path)
		d.problem("cannot read the kernel's peer credentials: "+cli.Words(credErr), "this OS or socket does not report peer credentials; serve will refuse it too")
		return
	case err != nil:
		d.ok("kernel reachable at %s", path)
		d.problem(fmt.Sprintf("the kernel runs as uid %d (pid %d): not you (uid %d), root, or --kernel-uid", cred.UID, cred.PID, os.Getuid()),
			fmt.Sprintf("run the kernel as yourself, or, if you trust uid %d, pass --kernel-uid %d to serve and doctor", cred.UID, cred.UID))
		return
	}
	d.ok("kernel reachable at %s", path)
	d.ok("kernel peer: uid %d (%s), pid %d", cred.UID, whoIs(cred.UID), cred.PID)
	if !checks[0].installed {
		d.skip("no installed harness entry names an integration: hello checked as %q; add one with %s install HARNESS", checks[0].name, prog)
	}
	for i, c := range checks {
		if i > 0 {
			if k, err = kernelclient.Dial(opts); err != nil {
				d.problem(cli.Words(fmt.Errorf("kernel not reachable at %s for %q: %w", path, c.name, err)), "run doctor again; check the kernel's log")
				continue
			}
		}
		d.turn(ctx, k, path, c)
		k.Close()
	}
}

// turn says hello as c.name on k and fetches its catalogue.
func (d *doctor) turn(ctx context.Context, k *kernelclient.Client, path string, c integrationCheck) {
	hctx, cancel := context.WithTimeout(ctx, HelloTimeout)
	defer cancel()
	hello, err := k.Hello(hctx, kproto.HelloParams{Name: c.name, Shim: kproto.Peer{Name: prog + " doctor", Version: d.opts.Version}})
	if err != nil {
		what, fix := "hello refused: "+err.Error(), "check the kernel's log"
		var he *cli.Error
		if errors.As(HelloError(path, err), &he) {
			what, fix = "hello refused: "+he.Err.Error(), he.Hint
		}
		d.problem(what, fix)
		return
	}
	by := ""
	if len(c.by) > 0 {
		by = " (named by " + strings.Join(c.by, ", ") + ")"
	}
	d.ok("hello accepted as integration %q%s: kernel %s %s, protocol %d, executionId %s", c.name, by, hello.Kernel.Name, hello.Kernel.Version, hello.Protocol, hello.ExecutionID)
	tools, hash, err := k.Catalogue(hctx)
	switch {
	case err != nil:
		d.problem("catalogue: "+cli.Words(err), "serve refuses this catalogue; check the kernel's tool definitions, or use a sharedos-mcp release that matches the kernel")
	case len(tools) == 0 && c.installed:
		d.problem(fmt.Sprintf("catalogue for %q is empty: no grant gives it a tool, so its harness shows no sharedos tools", c.name),
			fmt.Sprintf("run '%s kernel check' with the kernel's config to see what each integration may do, and add a [[grant]] with subject = \"integration:%s\"", prog, c.name))
	default:
		d.ok("catalogue for %q: %s, catalogHash %s (the published projection hashes the same)", c.name, cli.Count(len(tools), "tool", "tools"), hash)
	}
}

// socketFile runs serve's socket check and reports what it saw.
func (d *doctor) socketFile(path string, trusted sockpath.Trusted) bool {
	err := sockpath.CheckSocket(path, trusted)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.problem(fmt.Sprintf("no socket at %s: no kernel is listening there", path),
			"start a kernel: "+d.opts.Start+", or point --socket (or $SHAREDOS_SOCKET) at the one you run")
		return false
	case err != nil:
		d.problem(fmt.Sprintf("socket %s cannot be trusted: %s", path, cli.Words(err)),
			"the socket and every directory above it must belong to you or root and must not be writable by others (sticky /tmp is fine); run the kernel on a socket in a directory of mode 0700")
		return false
	}
	fi, err := os.Lstat(path)
	if err != nil {
		d.problem(fmt.Sprintf("socket %s: %s", path, cli.Words(err)), "run doctor again")
		return false
	}
	dir := filepath.Dir(path)
	di, err := os.Stat(dir)
	if err != nil {
		d.problem(fmt.Sprintf("socket directory %s: %s", dir, cli.Words(err)), "run doctor again")
		return false
	}
	uid := fi.Sys().(*syscall.Stat_t).Uid
	d.ok("socket is a socket (mode %v, uid %d) in %s (mode %v); it and every directory above it pass serve's owner and permission check", fi.Mode(), uid, dir, di.Mode())
	return true
}

func whoIs(uid uint32) string {
	switch {
	case uid == uint32(os.Getuid()):
		return "you"
	case uid == 0:
		return "root"
	}
	return "--kernel-uid"
}

// harnesses reports, for every harness and scope, whether its file holds
// our entry, whether that entry runs exe and finds the kernel's socket,
// and for pi whether script mode is off. The entries that are not
// installed are named together, on one line, at the end.
func (d *doctor) harnesses(entries []install.Installed, errs []error, exe string) {
	piInstalled := false
	var missing notInstalled
	for i, in := range entries {
		j := sameFileAs(entries, i)
		switch {
		case j >= 0 && entries[j].Found:
			d.skip("%s %s: the same file as %s %s (%s)", in.Harness.ID, in.Scope, entries[j].Harness.ID, entries[j].Scope, in.Path)
		case j >= 0:
			// Named once, with the scope it was read for.
		case errs[i] == nil && !in.Found:
			missing.add(in.Harness.ID, in.Scope)
		case d.harness(in, errs[i], exe) && in.Harness.HasScriptMode():
			piInstalled = true
		}
		if i+1 == len(entries) || entries[i+1].Harness.ID != in.Harness.ID {
			if piInstalled {
				d.scriptMode(in.Harness)
				piInstalled = false
			}
		}
	}
	if len(missing) > 0 {
		d.skip("not installed: %s; '%s install HARNESS' adds an entry", missing, prog)
	}
}

// notInstalled lists the harnesses without an entry, and in which
// scopes, in the order they were checked.
type notInstalled []struct {
	id     string
	scopes []install.Scope
}

func (n *notInstalled) add(id string, scope install.Scope) {
	if k := len(*n); k > 0 && (*n)[k-1].id == id {
		(*n)[k-1].scopes = append((*n)[k-1].scopes, scope)
		return
	}
	*n = append(*n, struct {
		id     string
		scopes []install.Scope
	}{id, []install.Scope{scope}})
}

// String groups the harnesses by the scopes they miss, each group where
// its first harness was checked: "claude-code, vscode (project); codex,
// gemini (user and project)".
func (n notInstalled) String() string {
	var keys []string
	ids := map[string][]string{}
	for _, h := range n {
		var where []string
		for _, s := range h.scopes {
			where = append(where, string(s))
		}
		k := strings.Join(where, " and ")
		if _, ok := ids[k]; !ok {
			keys = append(keys, k)
		}
		ids[k] = append(ids[k], h.id)
	}
	groups := make([]string, len(keys))
	for i, k := range keys {
		groups[i] = strings.Join(ids[k], ", ") + " (" + k + ")"
	}
	return strings.Join(groups, "; ")
}

// sameFileAs returns the index of an earlier entry of the same harness
// and name that reads the same file (the project scope, when doctor runs
// in the home directory), or -1.
func sameFileAs(entries []install.Installed, i int) int {
	for j := range i {
		if entries[j].Harness.ID == entries[i].Harness.ID && entries[j].Name == entries[i].Name && entries[i].Path != "" && entries[j].Path == entries[i].Path {
			return j
		}
	}
	return -1
}

// harness reports one entry and returns whether it is installed.
func (d *doctor) harness(in install.Installed, err error, exe string) bool {
	h, scope, path := in.Harness, in.Scope, in.Path
	label := fmt.Sprintf("%s %s:", h.ID, scope)
	if in.Name != install.ServerName {
		// A further entry, a subagent's (install --integration NAME).
		label = fmt.Sprintf("%s %s %s:", h.ID, scope, in.Name)
	}
	reinstall := fmt.Sprintf("%s install %s --scope %s (with the --socket and --integration you used)", prog, h.ID, scope)
	switch {
	case err != nil && path == "":
		d.skip("%s %s", label, cli.Words(err))
		return false
	case err != nil:
		d.problem(fmt.Sprintf("%s %s", label, cli.Words(err)), fmt.Sprintf("fix %s so that it parses; %s cannot read it either", path, h.Title))
		return false
	case in.Entry.Command == "":
		d.problem(fmt.Sprintf("%s the %s entry in %s has no command", label, in.Name, path), reinstall)
		return true
	}
	command := in.Entry.Command
	resolved, rerr := resolveCommand(command)
	switch {
	case rerr != nil:
		d.problem(fmt.Sprintf("%s %s runs %s, which cannot be found: %s", label, path, command, cli.Words(rerr)), reinstall)
	case exe == "":
		d.skip("%s %s runs %s; not compared, this binary's path is unknown", label, path, command)
	case resolved != exe:
		d.problem(fmt.Sprintf("%s %s runs %s, not this binary (%s)", label, path, command, exe), reinstall+", or run the doctor of the binary it names")
	default:
		d.ok("%s %s runs this binary", label, path)
	}
	if in.Integration() == "" {
		d.problem(fmt.Sprintf("%s the entry in %s runs serve without --integration, which serve refuses", label, path), reinstall)
	}
	d.entrySocket(label, in, reinstall)
	d.granted(label, in.Integration())
	d.startsWithoutKernel(label, h)
	return true
}

// granted warns about an entry whose integration no grant names: its
// catalogue holds only what integration:* gets, or nothing.
func (d *doctor) granted(label, name string) {
	g := d.opts.Grants
	if g == nil || name == "" || slices.Contains(g.Named, name) {
		return
	}
	fix := fmt.Sprintf("add a [[grant]] with subject = \"integration:%s\" to %s ('%s kernel check' shows what each integration may do)", name, g.Config, prog)
	if g.Wildcard {
		d.warning(fmt.Sprintf("%s no grant in %s names integration:%s: it gets only what integration:* gets", label, g.Config, name), fix)
		return
	}
	d.warning(fmt.Sprintf("%s no grant in %s names integration:%s: its catalogue is empty", label, g.Config, name), fix)
}

// entrySocket reports whether serve, run from this entry, looks for the
// kernel where doctor found it to be: an entry without --socket relies on
// serve's default, which differs between a harness started from this
// shell and one started from a GUI or an IDE without $XDG_RUNTIME_DIR.
func (d *doctor) entrySocket(label string, in install.Installed, reinstall string) {
	kernel := d.opts.Socket
	getenv := d.opts.Env.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if s := in.Socket(); s != "" {
		if filepath.Clean(s) == filepath.Clean(kernel) {
			d.ok("%s serve looks for the kernel at %s (--socket in the entry)", label, s)
			return
		}
		d.problem(fmt.Sprintf("%s the entry passes --socket %s, but doctor checked the kernel at %s", label, s, kernel),
			fmt.Sprintf("%s install %s --scope %s --socket %s, or run '%s doctor --socket %s' if the kernel is there", prog, in.Harness.ID, in.Scope, kernel, prog, s))
		return
	}
	shell, bare := sockpath.Default(getenv), install.BareSocket(getenv)
	switch {
	case filepath.Clean(bare) == filepath.Clean(kernel):
		d.ok("%s serve finds the kernel at %s however the harness is started", label, kernel)
	case filepath.Clean(shell) == filepath.Clean(kernel):
		d.problem(fmt.Sprintf("%s the entry has no --socket: a harness started from this shell finds %s, but one started from a GUI or an IDE (without $XDG_RUNTIME_DIR or $SHAREDOS_SOCKET) looks for %s", label, kernel, bare),
			fmt.Sprintf("%s install %s --scope %s (it writes --socket when it is needed)", prog, in.Harness.ID, in.Scope))
	default:
		d.problem(fmt.Sprintf("%s the entry has no --socket, so serve looks for %s (or %s without $XDG_RUNTIME_DIR), not the kernel doctor checked at %s", label, shell, bare, kernel),
			fmt.Sprintf("%s install %s --scope %s --socket %s", prog, in.Harness.ID, in.Scope, kernel))
	}
}

// scriptMode reports pi-mcp-adapter's script mode, which runs
// model-written JavaScript outside the kernel when it is on.
func (d *doctor) scriptMode(h install.Harness) {
	st, err := h.ScriptMode(d.opts.Env)
	switch {
	case err != nil:
		d.problem(fmt.Sprintf("%s: cannot tell whether pi-mcp-adapter's script mode is on: %s", h.ID, cli.Words(err)), "make the file readable, or check it by hand")
	case st.On:
		where := "by default: no config file sets settings.scriptMode"
		fix := prog + " install " + h.ID + " (it turns script mode off)"
		if st.File != "" {
			where = "set in " + st.File
			fix = "set \"settings\": {\"scriptMode\": false} in " + st.File
		}
		d.problem(fmt.Sprintf("%s: pi-mcp-adapter's script mode is on (%s): its mcpScript tool runs model-written JavaScript in node:vm, which can act outside the kernel with no grant and no audit record", h.ID, where), fix)
	default:
		d.ok("%s: pi-mcp-adapter's script mode is off (%s)", h.ID, st.File)
	}
}

// resolveCommand finds the file a harness would run for command: looked
// up on PATH when it has no slash, symlinks resolved.
func resolveCommand(command string) (string, error) {
	p, err := exec.LookPath(command)
	if err != nil {
		return "", err
	}
	if p, err = filepath.Abs(p); err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(p)
}

// DialError explains a failed kernelclient.Dial to the socket at path;
// start is the command that starts a kernel there, and then what to do
// once it runs, which is the command's own: serve's harness must
// reconnect, a command the user typed runs again. When no kernel runs at
// path it says so, names the socket and says how to start one, in words
// that stand alone: a harness shows serve's stderr only in its MCP log or
// status line, where nothing else explains it.
func DialError(path, start, then string, err error) error {
	hint := fmt.Sprintf("start it with '%s', then %s", start, then)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return cli.Hintf(fmt.Errorf("no kernel is running at %s: there is no socket", path), "%s", hint)
	case errors.Is(err, syscall.ECONNREFUSED):
		return cli.Hintf(fmt.Errorf("no kernel is running at %s: nothing listens on the socket a stopped kernel left behind", path), "%s", hint)
	}
	return cli.Hintf(fmt.Errorf("cannot reach the kernel at %s: %w", path, err), "%s", DialHint(err))
}

// DialHint says what to do about an error from kernelclient.Dial.
func DialHint(err error) string {
	switch {
	case errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.ECONNREFUSED):
		return "start a kernel with 'sharedos-mcp kernel', or point --socket (or $SHAREDOS_SOCKET) at the one you run"
	case errors.Is(err, sockpath.ErrTooLong):
		return "use a shorter socket path, e.g. under $XDG_RUNTIME_DIR"
	default:
		return "run 'sharedos-mcp doctor' to check the socket and the kernel"
	}
}

// HelloError explains a refused or failed integration.hello at the
// kernel on path, with a hint.
func HelloError(path string, err error) error {
	var ke *kernelclient.KernelError
	if errors.As(err, &ke) {
		switch ke.Code {
		case kproto.ErrUnsupportedProtocol:
			return cli.Hintf(fmt.Errorf("the kernel at %s does not speak kernel protocol %d", path, kproto.Version), "upgrade the kernel or use a sharedos-mcp release that matches it")
		case kproto.ErrInvalidIntegrationName:
			return cli.Hintf(fmt.Errorf("the kernel at %s refused the integration name: %w", path, err), "use a name the kernel accepts")
		}
	}
	return cli.Hintf(fmt.Errorf("the kernel at %s did not accept integration.hello: %w", path, err), "check the kernel's log; run 'sharedos-mcp doctor'")
}
