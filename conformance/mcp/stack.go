package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// stack is the server under test: the reference kernel on a socket of its
// own and the bridge whose stdio child is the shim (through the tap).
type stack struct {
	URL     string
	WireDir string

	kernel      *exec.Cmd
	kernelDone  chan error
	bridge      *exec.Cmd
	bridgeIn    io.WriteCloser
	bridgeDone  chan error
	bridgeLines chan struct{} // closed once the bridge's stderr is drained
}

// stackConfig says where everything is.
type stackConfig struct {
	Bin     string // sharedos-mcp
	Tap     string // this program
	Node    string
	Bridge  string // supergateway's dist/index.js
	Preload string // loopback.cjs
	Work    string // the run's directory: root/, kernel.sock, audit.jsonl, logs, wire/
}

// startStack starts the kernel, waits until it listens, then starts the
// bridge and waits until it listens. On error, whatever was started is
// stopped again.
func startStack(ctx context.Context, cfg stackConfig) (*stack, error) {
	s := &stack{WireDir: filepath.Join(cfg.Work, "wire")}
	root := filepath.Join(cfg.Work, "root")
	for _, d := range []string{root, filepath.Join(root, "docs"), s.WireDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("start stack: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "docs", "README.md"), []byte("A file for the MCP conformance run to list and read.\n"), 0o600); err != nil {
		return nil, fmt.Errorf("start stack: %w", err)
	}
	sock := filepath.Join(cfg.Work, "kernel.sock")
	if err := s.startKernel(ctx, cfg, root, sock); err != nil {
		return nil, err
	}
	if err := s.startBridge(ctx, cfg, sock); err != nil {
		s.stopKernel()
		return nil, err
	}
	return s, nil
}

func (s *stack) startKernel(ctx context.Context, cfg stackConfig, root, sock string) error {
	log, err := os.Create(filepath.Join(cfg.Work, "kernel.log"))
	if err != nil {
		return fmt.Errorf("start kernel: %w", err)
	}
	cmd := exec.Command(cfg.Bin, "kernel", "--root", root, "--socket", sock, "--audit", filepath.Join(cfg.Work, "audit.jsonl"))
	cmd.SysProcAttr = childAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		log.Close()
		return fmt.Errorf("start kernel: %w", err)
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start kernel: %w", err)
	}
	s.kernel, s.kernelDone = cmd, make(chan error, 1)
	listening := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		defer log.Close()
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			if !said && strings.Contains(sc.Text(), "kernel listening on") {
				said = true
				close(listening)
			}
		}
	}()
	go func() {
		<-drained
		s.kernelDone <- cmd.Wait()
	}()
	// The kernel writes "listening on" only once its socket accepts.
	select {
	case <-listening:
		return nil
	case err := <-s.kernelDone:
		s.kernelDone <- err
		return fmt.Errorf("start kernel: it exited before listening (%v); see %s", err, log.Name())
	case <-time.After(30 * time.Second):
		s.stopKernel()
		return fmt.Errorf("start kernel: not listening after 30s; see %s", log.Name())
	case <-ctx.Done():
		s.stopKernel()
		return ctx.Err()
	}
}

// loopbackLine is what loopback.cjs prints once the bridge listens.
var loopbackLine = regexp.MustCompile(`^loopback: listening on 127\.0\.0\.1:(\d+)$`)

func (s *stack) startBridge(ctx context.Context, cfg stackConfig, sock string) error {
	log, err := os.Create(filepath.Join(cfg.Work, "bridge.log"))
	if err != nil {
		return fmt.Errorf("start bridge: %w", err)
	}
	child := shellJoin(cfg.Tap, "tap", s.WireDir, "--", cfg.Bin, "serve", "--integration", "conformance", "--socket", sock, "--log-level", "warn")
	// --stateful keeps one stdio child per 2025-era session; 2026-07-28
	// requests get a child each either way. --sessionTimeout ends a
	// session the suite leaves open (it never sends DELETE), so its
	// shim process does not live until the bridge stops.
	cmd := exec.Command(cfg.Node, "--require", cfg.Preload, cfg.Bridge,
		"--stdio", child, "--outputTransport", "streamableHttp", "--stateful",
		"--sessionTimeout", "20000", "--port", "0", "--logLevel", "info")
	cmd.SysProcAttr = childAttr()
	cmd.Stdout = log
	stderr, err := cmd.StderrPipe()
	if err != nil {
		log.Close()
		return fmt.Errorf("start bridge: %w", err)
	}
	// The bridge stops when its stdin closes: that is how stop ends it,
	// and what ends it if this program dies first.
	if s.bridgeIn, err = cmd.StdinPipe(); err != nil {
		log.Close()
		return fmt.Errorf("start bridge: %w", err)
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start bridge: %w", err)
	}
	s.bridge, s.bridgeDone, s.bridgeLines = cmd, make(chan error, 1), make(chan struct{})
	port := make(chan string, 1)
	go func() {
		defer close(s.bridgeLines)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		said := false
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			if m := loopbackLine.FindStringSubmatch(sc.Text()); m != nil && !said {
				said = true
				port <- m[1]
			}
		}
	}()
	go func() {
		<-s.bridgeLines
		err := cmd.Wait()
		log.Close()
		s.bridgeDone <- err
	}()
	select {
	case p := <-port:
		s.URL = "http://127.0.0.1:" + p + "/mcp"
		return nil
	case err := <-s.bridgeDone:
		s.bridgeDone <- err
		return fmt.Errorf("start bridge: it exited before listening (%v); see %s", err, log.Name())
	case <-time.After(60 * time.Second):
		s.stopBridge()
		return fmt.Errorf("start bridge: not listening after 60s; see %s", log.Name())
	case <-ctx.Done():
		s.stopBridge()
		return ctx.Err()
	}
}

// stop ends the bridge (which ends its shim processes) and then the
// kernel. Each gets a bounded time to exit before it is killed.
func (s *stack) stop() error {
	return errors.Join(s.stopBridge(), s.stopKernel())
}

func (s *stack) stopBridge() error {
	if s.bridge == nil {
		return nil
	}
	s.bridgeIn.Close()
	// supergateway gives each child 5 s after SIGTERM before SIGKILL.
	return waitOrKill(s.bridge, s.bridgeDone, 30*time.Second, "bridge")
}

func (s *stack) stopKernel() error {
	if s.kernel == nil {
		return nil
	}
	s.kernel.Process.Signal(syscall.SIGTERM)
	return waitOrKill(s.kernel, s.kernelDone, 15*time.Second, "kernel")
}

// waitOrKill waits for a process this program started to exit, killing
// it by PID after grace. An exit by the signal it was asked to stop with
// is a clean stop.
func waitOrKill(cmd *exec.Cmd, done chan error, grace time.Duration, name string) error {
	var err error
	select {
	case err = <-done:
	case <-time.After(grace):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("stop %s: still running after %s; killed", name, grace)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
		return fmt.Errorf("stop %s: %w", name, err)
	}
	return err
}

// shellJoin quotes words for sh -c (supergateway runs --stdio through a
// shell).
func shellJoin(words ...string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}
