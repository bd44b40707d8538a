package cmd

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/sharedos/sharedos-mcp/install"
	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/service"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
	"github.com/sharedos/sharedos-mcp/kernel/config"
)

func runKernelService(stdio cli.IO, args []string) error {
	if len(args) == 0 {
		return cli.Usagef("say what to do: install, uninstall or status", "kernel service: missing install, uninstall or status")
	}
	verb := args[0]
	switch verb {
	case "-h", "-help", "--help":
		fs := newFlagSet(stdio, "kernel service", "install|uninstall|status [flags]",
			"Run the reference kernel as a service of this user: a systemd user unit on Linux, a launchd\n"+
				"agent on macOS. 'sharedos-mcp help kernel service VERB' shows each one's flags.")
		fs.Usage()
		return flag.ErrHelp
	}
	fs := newFlagSet(stdio, "kernel service "+verb, "[flags]", serviceSummary(verb))
	var configFile, socket *string
	if verb == "install" {
		configFile = fs.String("config", "", "the config `file` the service runs the kernel with (default $XDG_CONFIG_HOME/sharedos/kernel.toml, else ~/.config/sharedos/kernel.toml)")
		socket = fs.String("socket", "", "the socket `path` the service listens on (default: the one serve finds from this shell)")
	}
	switch verb {
	case "install", "uninstall", "status":
	default:
		return cli.Usagef("use install, uninstall or status", "kernel service: unknown action %q", verb)
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("kernel service "+verb+" takes flags only", "kernel service %s: unexpected argument %q", verb, fs.Arg(0))
	}
	p, err := servicePlatform()
	if err != nil {
		return err
	}
	switch verb {
	case "install":
		return serviceInstall(stdio, p, *configFile, *socket)
	case "uninstall":
		return serviceUninstall(stdio, p)
	}
	return serviceStatus(stdio, p)
}

func serviceUninstall(stdio cli.IO, p service.Platform) error {
	path, _ := p.UnitPath()
	noManager := p.CheckManager(service.ExecRunner)
	removed, err := p.Uninstall(service.ExecRunner)
	var me *service.ManagerError
	switch {
	case errors.As(err, &me):
		return cli.Hintf(fmt.Errorf("kernel service uninstall: removed %s, but %w", path, err),
			"run '%s' yourself, so that the service manager forgets the unit", strings.Join(me.Command, " "))
	case err != nil:
		return cli.Hintf(fmt.Errorf("kernel service uninstall: %w", err), "remove %s yourself, or check that its directory is yours to write", path)
	case !removed:
		fmt.Fprintf(stdio.Out, "no service installed (%s does not exist); nothing changed\n", path)
	case noManager != nil:
		fmt.Fprintf(stdio.Out, "removed %s; no service manager runs here, so there was nothing to stop\n", path)
	default:
		fmt.Fprintf(stdio.Out, "stopped the kernel service and removed %s\n", path)
	}
	return nil
}

// serviceStatus says what the manager says of the service, and fails
// when it cannot tell whether the kernel runs.
func serviceStatus(stdio cli.IO, p service.Platform) error {
	st, err := p.Status(service.ExecRunner)
	if err != nil {
		return cli.Hintf(fmt.Errorf("kernel service status: %w", err), "run '%s kernel' under your own service manager", prog)
	}
	if !st.Installed {
		fmt.Fprintf(stdio.Out, "not installed (%s does not exist); install it with '%s kernel service install'\n", st.UnitPath, prog)
		return nil
	}
	if st.State != "" {
		fmt.Fprintf(stdio.Out, "installed %s\nstate %s\nlogs %s\n", st.UnitPath, st.State, st.Logs)
		return nil
	}
	fmt.Fprintf(stdio.Out, "installed %s\nlogs %s\n", st.UnitPath, st.Logs)
	why := st.Detail
	var nm *service.NoManagerError
	if errors.As(p.CheckManager(service.ExecRunner), &nm) {
		why = nm.Why
	}
	return cli.Hintf(fmt.Errorf("kernel service status: cannot tell whether the kernel runs: %s", why),
		"'%s doctor' asks the kernel itself, on its socket", prog)
}

func serviceSummary(verb string) string {
	switch verb {
	case "install":
		return "Install the reference kernel as a service of this user (a systemd user unit on Linux, a\n" +
			"launchd agent on macOS) that runs it with the config and socket it names, starts it at\n" +
			"login, restarts it if it fails, and reloads its config on 'systemctl --user reload'.\n" +
			"Installing again replaces the unit. Where no service manager runs for you (a container, WSL\n" +
			"without systemd, a shell with no login session) it writes nothing and says what works there."
	case "uninstall":
		return "Stop the kernel service and remove its unit."
	}
	return "Say whether the kernel service is installed and running, and where its log is. Exits 1\n" +
		"when the service manager cannot be asked."
}

func servicePlatform() (service.Platform, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return service.Platform{}, cli.Hintf(fmt.Errorf("kernel service: %w", err), "set HOME")
	}
	p := service.Platform{OS: runtime.GOOS, Home: home, ConfigHome: os.Getenv("XDG_CONFIG_HOME"), RuntimeDir: os.Getenv("XDG_RUNTIME_DIR"), UID: os.Getuid()}
	if _, err := p.UnitPath(); err != nil {
		return p, cli.Hintf(fmt.Errorf("kernel service: %w", err), "run '%s kernel' under your own service manager", prog)
	}
	return p, nil
}

func serviceInstall(stdio cli.IO, p service.Platform, configFile, socket string) error {
	if configFile == "" {
		path, err := config.DefaultPath(os.Getenv)
		if err != nil {
			return cli.Hintf(fmt.Errorf("kernel service install: %w", err), "pass --config FILE")
		}
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return cli.Hintf(fmt.Errorf("kernel service install: no config at %s", path),
				"write one with '%s kernel init --root DIR', or pass --config FILE", prog)
		}
		configFile = path
	}
	abs, err := filepath.Abs(configFile)
	if err != nil {
		return fmt.Errorf("kernel service install: %w", err)
	}
	// The service must start: refuse a config the kernel would refuse.
	if _, err := loadKernelConfig(abs, ""); err != nil {
		return err
	}
	if socket == "" {
		socket = sockpath.Default(os.Getenv)
	}
	if socket, err = filepath.Abs(socket); err != nil {
		return fmt.Errorf("kernel service install: %w", err)
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return fmt.Errorf("kernel service install: locate this binary: %w", err)
	}
	if env, err := processEnv(); err == nil && install.InBuildCache(exe, env) {
		cli.Warn(stdio.Err, prog, fmt.Sprintf("this binary is a temporary build (%s): the service stops working when Go removes it", exe),
			"run 'make install' and the installed sharedos-mcp's 'kernel service install'")
	}
	spec := service.Spec{Executable: exe, Config: abs, Socket: socket, LogFile: p.DefaultLogFile()}
	path, err := p.Install(spec, service.ExecRunner)
	var me *service.ManagerError
	var nm *service.NoManagerError
	switch {
	case errors.As(err, &nm):
		return cli.Hintf(fmt.Errorf("kernel service install: %s; nothing was written", nm.Why), "%s", noManagerHint(p, nm, exe, abs, socket))
	case errors.As(err, &me):
		return cli.Hintf(fmt.Errorf("kernel service install: %w; the unit was taken out again", err),
			"'journalctl --user -u %s' may say why; fix that, then run install again", service.SystemdUnit)
	case err != nil:
		return fmt.Errorf("kernel service install: %w", err)
	}
	fmt.Fprintf(stdio.Out, "installed and started %s: the kernel runs with %s on %s\n", path, abs, socket)
	st, _ := p.Status(service.ExecRunner)
	fmt.Fprintf(stdio.Out, "logs: %s\n", st.Logs)
	if p.OS == "linux" {
		fmt.Fprintln(stdio.Out, "note: a user service stops when you log out unless lingering is on: loginctl enable-linger $USER")
	}
	return nil
}

// noManagerHint is what works where no service manager runs for the
// user: lingering, which starts one, when systemd runs the system; else
// the kernel in the background, its log in a file.
func noManagerHint(p service.Platform, nm *service.NoManagerError, exe, configFile, socket string) string {
	bin := exe
	if onPath, err := exec.LookPath(prog); err == nil {
		if resolved, err := filepath.EvalSymlinks(onPath); err == nil && resolved == exe {
			bin = prog
		}
	}
	args := []string{bin, "kernel"}
	if def, _ := config.DefaultPath(os.Getenv); configFile != def {
		args = append(args, "--config", configFile)
	}
	if socket != sockpath.Default(os.Getenv) {
		args = append(args, "--socket", socket)
	}
	logDir, err := config.DefaultStateDir(os.Getenv)
	if err != nil {
		logDir = filepath.Dir(configFile)
	}
	background := "nohup " + shellWords(append(args, "--log-file", filepath.Join(logDir, "kernel.log"))) + " >/dev/null 2>&1 &"
	if !nm.Linger {
		return "run the kernel in the background instead (it stops at shutdown; start it again after a reboot): " + background
	}
	return fmt.Sprintf("'loginctl enable-linger $USER' starts a user manager for you, now and at every boot; then run 'XDG_RUNTIME_DIR=/run/user/%d %s kernel service install' again. Or run the kernel in the background: %s",
		p.UID, bin, background)
}

// startKernel is the command that starts a kernel on socket, for the
// hints of commands that found none there: the service's start command
// when one is installed; else the kernel on the config it would load,
// naming --config and --socket only when it would not find them itself,
// and a files root to serve when there is no config.
func startKernel(configFile, socket string) string {
	if p, err := servicePlatform(); err == nil {
		if path, err := p.UnitPath(); err == nil && lexists(path) {
			return strings.Join(p.StartCommand(), " ")
		}
	}
	args := []string{prog, "kernel"}
	switch def, _ := config.DefaultPath(os.Getenv); {
	case configFile != "":
		args = append(args, "--config", configFile)
	case def == "" || !lexists(def):
		args = append(args, "--root", "DIR")
	}
	if socket != "" && socket != sockpath.Default(os.Getenv) {
		args = append(args, "--socket", socket)
	}
	return shellWords(args)
}
