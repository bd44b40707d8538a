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
	// Integration is the name to say hello as.
	Integration string
	// KernelUID is one more uid the kernel may run as, as given to serve;
	// -1 for none.
	KernelUID int
	// Version is this binary's version.
	Version string
	// Env is where the harness configurations are looked up.
	Env install.Env
}

// Run prints every check to w and returns how many found a problem.
func Run(ctx context.Context, w io.Writer, opts Options) int {
	d := &doctor{out: w, opts: opts}
	exe := d.binary()
	d.kernel(ctx, opts.Socket, opts.From, opts.Integration, kernelclient.Options{Socket: opts.Socket, KernelUID: opts.KernelUID})
	d.harnesses(opts.Env, exe)
	return d.problems
}

// doctor prints one line per check and counts the problems.
type doctor struct {
	out      io.Writer
	opts     Options
	problems int
}

func (d *doctor) ok(format string, args ...any) {
	fmt.Fprintf(d.out, "ok      "+format+"\n", args...)
}

// skip reports a check that does not apply: nothing installed, or an
// earlier problem makes it meaningless.
func (d *doctor) skip(format string, args ...any) {
	fmt.Fprintf(d.out, "-       "+format+"\n", args...)
}

func (d *doctor) problem(what, fix string) {
	d.problems++
	fmt.Fprintf(d.out, "problem %s\n  fix: %s\n", what, fix)
}

// binary reports this binary and returns its path with symlinks
// resolved, the form install writes; "" when it cannot be found.
func (d *doctor) binary() string {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		d.problem(fmt.Sprintf("cannot locate this binary: %v", err), "run sharedos-mcp by its installed path")
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

// kernel checks the socket, the connection, the kernel's credentials,
// hello and the catalogue, stopping at the first that fails since each
// needs the one before.
func (d *doctor) kernel(ctx context.Context, path, from, integration string, opts kernelclient.Options) {
	if err := sockpath.CheckLen(path); err != nil {
		d.problem(fmt.Sprintf("socket %s (from %s): %v", path, from, err), "use a shorter socket path, e.g. under $XDG_RUNTIME_DIR, for the kernel and serve alike")
		d.skip("kernel checks skipped: no usable socket path")
		return
	}
	d.ok("socket %s (from %s), %d of %d bytes", path, from, len(path), sockpath.MaxLen())
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
	opts.PeerCred = func(c *net.UnixConn) (peercred.Cred, error) {
		connected = true
		cred, credErr = peercred.Get(c)
		return cred, credErr
	}
	k, err := kernelclient.Dial(opts)
	switch {
	case err != nil && !connected:
		fix := "start a kernel: " + prog + " kernel --root DIR --socket " + path
		if errors.Is(err, syscall.ECONNREFUSED) {
			fix = "nothing listens on this socket; a kernel that stopped uncleanly left it behind. " + fix + " (it replaces the stale socket)"
		}
		d.problem(fmt.Sprintf("kernel not reachable at %s: %v", path, err), fix)
		return
	case credErr != nil:
		d.ok("kernel reachable at %s", path)
		d.problem(fmt.Sprintf("cannot read the kernel's peer credentials: %v", credErr), "this OS or socket does not report peer credentials; serve will refuse it too")
		return
	case err != nil:
		d.ok("kernel reachable at %s", path)
		d.problem(fmt.Sprintf("the kernel runs as uid %d (pid %d): not you (uid %d), root, or --kernel-uid", cred.UID, cred.PID, os.Getuid()),
			fmt.Sprintf("run the kernel as yourself, or, if you trust uid %d, pass --kernel-uid %d to serve and doctor", cred.UID, cred.UID))
		return
	}
	defer k.Close()
	d.ok("kernel reachable at %s", path)
	d.ok("kernel peer: uid %d (%s), pid %d", cred.UID, whoIs(cred.UID), cred.PID)

	hctx, cancel := context.WithTimeout(ctx, HelloTimeout)
	defer cancel()
	hello, err := k.Hello(hctx, kproto.HelloParams{Name: integration, Shim: kproto.Peer{Name: prog + " doctor", Version: d.opts.Version}})
	if err != nil {
		what, fix := "hello refused: "+err.Error(), "check the kernel's log"
		var he *cli.Error
		if errors.As(HelloError(path, err), &he) {
			what, fix = "hello refused: "+he.Err.Error(), he.Hint
		}
		d.problem(what, fix)
		return
	}
	d.ok("hello accepted as integration %q: kernel %s %s, protocol %d, executionId %s", integration, hello.Kernel.Name, hello.Kernel.Version, hello.Protocol, hello.ExecutionID)
	tools, hash, err := k.Catalogue(hctx)
	if err != nil {
		d.problem("catalogue: "+err.Error(), "serve refuses this catalogue; check the kernel's tool definitions, or use a sharedos-mcp release that matches the kernel")
		return
	}
	d.ok("catalogue for %q: %d tools, catalogHash %s (the published projection hashes the same)", integration, len(tools), hash)
}

// socketFile runs serve's socket check and reports what it saw.
func (d *doctor) socketFile(path string, trusted sockpath.Trusted) bool {
	err := sockpath.CheckSocket(path, trusted)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.problem(fmt.Sprintf("no socket at %s: no kernel is listening there", path),
			"start a kernel: "+prog+" kernel --root DIR --socket "+path+", or point --socket (or $SHAREDOS_SOCKET) at the one you run")
		return false
	case err != nil:
		d.problem(fmt.Sprintf("socket %s cannot be trusted: %v", path, err),
			"the socket and every directory above it must belong to you or root and must not be writable by others (sticky /tmp is fine); run the kernel on a socket in a directory of mode 0700")
		return false
	}
	fi, err := os.Lstat(path)
	if err != nil {
		d.problem(fmt.Sprintf("socket %s: %v", path, err), "run doctor again")
		return false
	}
	dir := filepath.Dir(path)
	di, err := os.Stat(dir)
	if err != nil {
		d.problem(fmt.Sprintf("socket directory %s: %v", dir, err), "run doctor again")
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
// our entry and whether that entry runs exe.
func (d *doctor) harnesses(env install.Env, exe string) {
	for _, id := range install.Harnesses() {
		h, _ := install.Lookup(id)
		for _, scope := range []install.Scope{install.ScopeUser, install.ScopeProject} {
			d.harness(h, scope, env, exe)
		}
	}
}

func (d *doctor) harness(h install.Harness, scope install.Scope, env install.Env, exe string) {
	label := fmt.Sprintf("%s %s:", h.ID, scope)
	reinstall := fmt.Sprintf("%s install %s --scope %s (with the --socket and --integration you used)", prog, h.ID, scope)
	path, found, command, err := install.Inspect(h, scope, env)
	switch {
	case err != nil && path == "":
		d.skip("%s %v", label, err)
		return
	case err != nil:
		d.problem(fmt.Sprintf("%s %v", label, err), fmt.Sprintf("fix %s so that it parses; %s cannot read it either", path, h.Title))
		return
	case !found:
		d.skip("%s not installed (%s)", label, path)
		return
	case command == "":
		d.problem(fmt.Sprintf("%s the %s entry in %s has no command", label, install.ServerName, path), reinstall)
		return
	}
	resolved, err := resolveCommand(command)
	switch {
	case err != nil:
		d.problem(fmt.Sprintf("%s %s runs %s, which cannot be found: %v", label, path, command, err), reinstall)
	case exe == "":
		d.skip("%s %s runs %s; not compared, this binary's path is unknown", label, path, command)
	case resolved != exe:
		d.problem(fmt.Sprintf("%s %s runs %s, not this binary (%s)", label, path, command, exe), reinstall+", or run the doctor of the binary it names")
	default:
		d.ok("%s %s runs this binary", label, path)
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
