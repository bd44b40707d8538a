package upstream

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// supervisorArg is the first argument of a supervisor process; see
// MaybeSupervise.
const supervisorArg = "__sharedos-upstream-supervisor"

// The supervisor's file descriptors besides stdio, as the Manager passes
// them (exec.Cmd.ExtraFiles start at 3).
const (
	lifelineFD = 3 // read end of a pipe only the kernel writes to: EOF means the kernel is gone
	statusFD   = 4 // where the supervisor reports, one line each: "started PID", "error MSG", "exited HOW"
)

// MaybeSupervise makes this process an upstream's supervisor if the
// Manager started it as one, and then exits; otherwise it returns at
// once. Every program that runs a Manager must call it first thing in
// main (a test binary, in TestMain before m.Run): the Manager starts each
// upstream through a copy of its own program acting as supervisor.
//
// The supervisor exists because nothing else can outlive a SIGKILLed
// kernel to end what an upstream spawned. It starts the upstream in a
// process group of its own, with the supervisor's stdio and environment,
// and ends the whole group — SIGTERM, then SIGKILL after the grace period
// the Manager gave it — when the kernel asks (SIGTERM), when the kernel
// dies (the lifeline pipe reads EOF; on Linux also the parent-death
// signal), or, with SIGKILL at once, when the upstream exits by itself.
// On Linux it is also the subreaper of the upstream's descendants, so
// those that left the group (setsid, setpgid, a double fork) come to it
// once their parents are gone, and it kills them too (endAdopted).
func MaybeSupervise() {
	if len(os.Args) < 2 || os.Args[1] != supervisorArg {
		return
	}
	os.Exit(supervise(os.Args[2:]))
}

// supervise runs the supervisor: args are the grace period, "--", and the
// upstream's command.
func supervise(args []string) int {
	// Inherited descriptors are not close-on-exec; the upstream must not
	// hold the lifeline or the status pipe.
	syscall.CloseOnExec(lifelineFD)
	syscall.CloseOnExec(statusFD)
	status := os.NewFile(statusFD, "status")
	report := func(format string, a ...any) { fmt.Fprintf(status, format+"\n", a...) }
	if len(args) < 3 || args[1] != "--" {
		report("error supervisor: want GRACE -- COMMAND...")
		return 2
	}
	grace, err := time.ParseDuration(args[0])
	if err != nil {
		report("error supervisor: %v", err)
		return 2
	}
	// Before the upstream starts, so that a SIGTERM in between is not lost.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	adopting := adoptOrphans()

	cmd := exec.Command(args[2], args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = upstreamAttr()
	if err := cmd.Start(); err != nil {
		report("error %s", oneLine(err.Error()))
		return 127
	}
	pgid := cmd.Process.Pid
	report("started %d", pgid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if adopting {
		// Adopted orphans that exit are reaped as they go, not kept as
		// zombies for the upstream's whole life.
		chld := make(chan os.Signal, 1)
		signal.Notify(chld, syscall.SIGCHLD)
		go func() {
			for range chld {
				reapAdopted(pgid)
			}
		}()
	}
	kernelGone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.NewFile(lifelineFD, "lifeline"))
		close(kernelGone)
	}()

	select {
	case err := <-exited:
		// What the upstream leaves behind goes with it.
		killGroup(pgid, syscall.SIGKILL)
		endAdopted(pgid)
		report("exited %s", describeExit(err))
		return 0
	case <-sigs:
	case <-kernelGone:
	}
	killGroup(pgid, syscall.SIGTERM)
	var waitErr error
	done := false
	select {
	case waitErr = <-exited:
		done = true
	case <-time.After(grace):
	}
	killGroup(pgid, syscall.SIGKILL)
	if !done {
		select {
		case waitErr = <-exited:
		case <-time.After(grace):
			waitErr = errors.New("still running after SIGKILL")
		}
	}
	endAdopted(pgid)
	report("exited %s", describeExit(waitErr))
	return 0
}

// killGroup signals every process of the group; a group already gone is
// not an error worth reporting.
func killGroup(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
}

func describeExit(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return oneLine(err.Error())
}

func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}
