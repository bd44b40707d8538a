package peercred

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestGetOverRealSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *net.UnixConn, 1)
	go func() {
		c, err := ln.AcceptUnix()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server := <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	defer server.Close()

	for name, c := range map[string]*net.UnixConn{"server sees client": server, "client sees server": client} {
		cred, err := Get(c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cred.UID != uint32(os.Getuid()) || cred.GID != uint32(os.Getgid()) || cred.PID != os.Getpid() {
			t.Errorf("%s: cred = %+v, want uid %d gid %d pid %d", name, cred, os.Getuid(), os.Getgid(), os.Getpid())
		}
	}
}
