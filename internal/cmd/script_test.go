package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/sharedos/sharedos-mcp/internal/hermetic"
	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/kernel/status"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/kernelclient"
)

// TestMain lets the test binary stand in for sharedos-mcp in the scripts
// (testscript puts a copy on their PATH): the command runs Main, as the
// real binary does, in a process of its own.
//
// It is also what the kernel runs as each upstream's supervisor, and the
// test upstream of internal/testupstream: "testupstream FLAGS" in a
// script's [[upstream]] command.
//
// The tests themselves run away from the user's own configuration and
// state (hermetic.Isolate); the commands keep the environment the script
// gives them.
func TestMain(m *testing.M) {
	upstream.MaybeSupervise()
	testupstream.MaybeRun()
	testscript.Main(hermeticRun{m}, map[string]func(){
		prog:           func() { os.Exit(Main(Build{})) },
		"testupstream": func() { os.Exit(testupstream.Main(os.Args[1:])) },
	})
}

// hermeticRun runs the tests with hermetic.Isolate.
type hermeticRun struct{ m *testing.M }

func (h hermeticRun) Run() int {
	restore, err := hermetic.Isolate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hermetic:", err)
		return 1
	}
	defer restore()
	return h.m.Run()
}

// TestScripts runs the user-facing command line as a user meets it:
// testdata/script/*.txtar, each a fresh home directory and working
// directory. Every message a script checks is the exact text a user reads.
//
// Besides testscript's own commands, a script has:
//
//	code N command args...   run command; its exit code must be N
//	waitsock path            wait (at most 20s) until path accepts a connection
//	waitupstream dir name [state]  wait (at most 60s) until the kernel's status in
//	                         state directory dir says upstream name is ready (or
//	                         in state)
//	approvalid VAR           wait (at most 20s) until the kernel at $SHAREDOS_SOCKET
//	                         holds a call for approval, and set VAR to its id
//
// and these variables: HOME ($WORK/home), SOCKDIR (a directory with a
// path short enough for a socket), BINDIR (where the sharedos-mcp under
// test lives) and UID.
func TestScripts(t *testing.T) {
	bin, err := exec.LookPath(prog)
	if err != nil {
		t.Fatalf("testscript did not put %s on PATH: %v", prog, err)
	}
	if bin, err = filepath.EvalSymlinks(bin); err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			home := filepath.Join(env.WorkDir, "home")
			if err := os.Mkdir(home, 0o700); err != nil {
				return err
			}
			sockDir, err := os.MkdirTemp("", "ts")
			if err != nil {
				return err
			}
			env.Defer(func() { os.RemoveAll(sockDir) })
			env.Setenv("HOME", home)
			env.Setenv("SOCKDIR", sockDir)
			env.Setenv("BINDIR", filepath.Dir(bin))
			env.Setenv("UID", strconv.Itoa(os.Getuid()))
			// The command is this test binary, which under -race sleeps
			// a second at exit for late reports (GORACE's atexit_sleep_ms,
			// 1000 by default): a second per command, over a hundred.
			env.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"code":         cmdCode,
			"waitsock":     cmdWaitSock,
			"waitupstream": cmdWaitUpstream,
			"approvalid":   cmdApprovalID,
		},
	})
}

func cmdCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: code N command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("code: %q is not an exit code", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("code: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// cmdWaitSock polls, since a background kernel says it is listening only
// on a stream the script cannot read until the kernel exits.
func cmdWaitSock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitsock path")
	}
	path := ts.MkAbs(args[0])
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("nothing listens on %s after 20s: %v", path, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cmdWaitUpstream polls the status file a kernel rewrites when an
// upstream changes state: a background kernel's log is not readable
// until it exits.
func cmdWaitUpstream(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: waitupstream statedir name [state]")
	}
	want := "ready"
	if len(args) == 3 {
		want = args[2]
	}
	dir := ts.MkAbs(args[0])
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := status.Read(dir)
		if err == nil {
			for _, u := range r.Upstreams {
				if u.Name == args[1] && u.State == want {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			ts.Fatalf("upstream %s not %s in %s after 60s: %+v %v", args[1], want, dir, r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cmdApprovalID polls the kernel, as its operator, for the call it holds
// (a background serve's call reaches it when it does), and names its
// approval id for the commands after it.
func cmdApprovalID(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: approvalid VAR")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		k, err := kernelclient.Dial(kernelclient.Options{Socket: ts.Getenv("SHAREDOS_SOCKET"), KernelUID: -1})
		if err == nil {
			list, err := k.Approvals(context.Background())
			k.Close()
			if err == nil && len(list) > 0 {
				ts.Setenv(args[0], list[0].ID)
				return
			}
		}
		if time.Now().After(deadline) {
			ts.Fatalf("no call waits for approval after 20s (%v)", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
