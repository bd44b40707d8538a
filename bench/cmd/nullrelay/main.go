// Command nullrelay is the floor under any relay's added latency: it
// connects to a socket and copies bytes both ways, stdin to the socket
// and the socket to stdout, and looks at none of them. benchrelay spawns
// it in front of a socket that sends every byte back, and times a call
// line through it against the same line sent to the socket itself: what
// is left is what a process in the path costs on this machine, before
// any relay decides anything.
package main

import (
	"flag"
	"io"
	"net"
	"os"
)

func main() {
	socket := flag.String("socket", "", "the socket to relay to")
	flag.Parse()
	c, err := net.Dial("unix", *socket)
	if err != nil {
		os.Exit(1)
	}
	done := make(chan struct{})
	go func() {
		io.Copy(os.Stdout, c)
		close(done)
	}()
	io.Copy(c, os.Stdin)
	c.(*net.UnixConn).CloseWrite()
	<-done
}
