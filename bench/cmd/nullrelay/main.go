// Command nullrelay is the floor under any relay's added latency: it
// connects to a socket and copies bytes both ways, stdin to the socket
// and the socket to stdout, and looks at none of them. benchrelay spawns
// it in front of a socket that sends every byte back, and times a call
// line through it against the same line sent to the socket itself: what
// is left is what a process in the path costs on this machine, before
// any relay decides anything. It does its I/O as serve does (one P,
// stdin through the runtime's poller), so that it bounds serve and not a
// slower way of moving bytes.
package main

import (
	"flag"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
)

func main() {
	runtime.GOMAXPROCS(1)
	socket := flag.String("socket", "", "the socket to relay to")
	flag.Parse()
	c, err := net.Dial("unix", *socket)
	if err != nil {
		os.Exit(1)
	}
	stdin := os.Stdin
	if syscall.SetNonblock(0, true) == nil {
		stdin = os.NewFile(0, "stdin") // registered with the poller
	}
	done := make(chan struct{})
	go func() {
		io.Copy(os.Stdout, c)
		close(done)
	}()
	io.Copy(c, stdin)
	c.(*net.UnixConn).CloseWrite()
	<-done
}
