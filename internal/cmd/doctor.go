package cmd

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

	"github.com/sharedos/sharedos-mcp/install"
	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/peercred"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
	"github.com/sharedos/sharedos-mcp/kernelclient"
	"github.com/sharedos/sharedos-mcp/policy"
)

func runDoctor(ctx context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "doctor", "[flags]",
		"Check, one line each, what serve needs: this binary, the kernel socket and the directories\n"+
			"above it, the kernel's peer credentials, integration.hello and the catalogue (one turn at\n"+
			"the kernel), then every harness's user and project configuration. A line starts with\n"+
			"'ok', 'problem' (followed by a 'fix:' line) or '-' (not installed, not applicable).\n"+
			"Exits 1 when there is any problem.")
	socket := fs.String("socket", "", "kernel socket `path` to check (default as serve: $SHAREDOS_SOCKET, else $XDG_RUNTIME_DIR/sharedos/kernel.sock, else $TMPDIR/sharedos-$UID/kernel.sock)")
	integration := fs.String("integration", "doctor", "integration `name` to say hello as and fetch the catalogue for")
	kernelUID := fs.Int("kernel-uid", -1, "one more `uid` the kernel may run as, as given to serve")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("doctor takes flags only", "doctor: unexpected argument %q", fs.Arg(0))
	}
	if !policy.ValidIntegrationName(*integration) {
		return cli.Usagef("use 1-64 letters, digits, spaces, '-', '_' or '.'", "doctor: bad integration name %q", *integration)
	}
	d := &doctor{out: stdio.Out}
	exe := d.binary()
	path, from := socketChoice(*socket, os.Getenv)
	d.kernel(ctx, path, from, *integration, kernelclient.Options{Socket: path, KernelUID: *kernelUID})
	env, err := processEnv()
	if err != nil {
		return err
	}
	d.harnesses(env, exe)
	if d.problems > 0 {
		return cli.Hintf(fmt.Errorf("doctor found %d problem(s)", d.problems), "fix them in order: the first often causes the ones after it")
	}
	return nil
}

// doctor prints one line per check and counts the problems.
type doctor struct {
	out      io.Writer
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
	d.ok("%s %s at %s", prog, shimVersion(), exe)
	return exe
}

// socketChoice returns the socket serve would use and where that choice
// came from, in sockpath.Default's order.
func socketChoice(flagValue string, getenv func(string) string) (path, from string) {
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

	hctx, cancel := context.WithTimeout(ctx, helloTimeout)
	defer cancel()
	hello, err := k.Hello(hctx, kproto.HelloParams{Name: integration, Shim: kproto.Peer{Name: prog + " doctor", Version: shimVersion()}})
	if err != nil {
		what, fix := "hello refused: "+err.Error(), "check the kernel's log"
		var he *cli.Error
		if errors.As(helloError(path, err), &he) {
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
