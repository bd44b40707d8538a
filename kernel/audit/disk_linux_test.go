package audit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// tinyTmpfs mounts a tmpfs of the given size (mount's size= syntax) on a
// fresh directory, or skips the test where that takes privileges the
// tests do not have.
func tinyTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("full-disk case: needs root to mount a tiny tmpfs (CI runs the tests as root)")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("full-disk case: cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillDisk writes a file in dir until the file system is full, then
// gives back free bytes of it.
func fillDisk(t *testing.T, dir string, free int64) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(fi.Size() - free); err != nil {
		t.Fatal(err)
	}
	return p
}

// fillLog writes events from `from` until a write fails and returns the
// index of the first that failed.
func fillLog(t *testing.T, a *Log, from int) int {
	t.Helper()
	for i := from; i < from+100000; i++ {
		if err := a.Write(testEvent(i)); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("event %d: %v, want ENOSPC", i, err)
			}
			return i
		}
	}
	t.Fatal("the disk never filled")
	return 0
}

// TestAFullDiskLeavesTheLogWhole reproduces the full-disk report on a
// real 1 MiB tmpfs: the write that does not fit must leave no torn
// fragment (a line straddling a page the file system cannot give is
// written in part), must keep failing while the disk is full without
// adding bytes, and the log must work again, without a restart, once
// space is freed.
func TestAFullDiskLeavesTheLogWhole(t *testing.T) {
	dir := tinyTmpfs(t, "1m")
	path := filepath.Join(dir, "state", "audit.jsonl")
	a := openLog(t, path)
	t.Cleanup(func() { a.Close() })
	filler := fillDisk(t, dir, 16<<10)

	failed := fillLog(t, a, 0)
	lines := logLines(t, path) // fails on a torn last line
	if len(lines) != failed {
		t.Fatalf("%d events written, %d lines in the log", failed, len(lines))
	}
	for i, l := range lines {
		if got := fields(t, l)["callId"]; got != "c"+strconv.Itoa(i) {
			t.Fatalf("line %d holds call %v", i+1, got)
		}
	}
	size := fileSize(t, path)
	for range 5 {
		if err := a.Write(testEvent(failed)); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("write on a full disk: %v, want ENOSPC", err)
		}
	}
	if s := fileSize(t, path); s != size {
		t.Errorf("failed writes changed the log from %d to %d bytes", size, s)
	}
	t.Logf("%d events fit; the next failed and left the file at %d bytes, all whole lines", failed, size)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	writeEvents(t, a, failed, failed+3)
	lines = logLines(t, path)
	if len(lines) != failed+3 || fields(t, lines[failed])["callId"] != "c"+strconv.Itoa(failed) {
		t.Errorf("after freeing space: %d lines, want %d with call c%d next", len(lines), failed+3, failed)
	}
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// fsAppendFL is FS_APPEND_FL of linux/fs.h, which x/sys/unix lacks.
const fsAppendFL = 0x20

// TestAnAppendOnlyLogOnAFullDisk: on a file the kernel cannot truncate
// (chattr +a, which an operator can set to keep even the kernel's uid
// from rewriting history), the bytes of a short write stay; the next
// write after space comes back sets them aside behind a segment, and the
// chain holds.
func TestAnAppendOnlyLogOnAFullDisk(t *testing.T) {
	dir := tinyTmpfs(t, "1m")
	path := filepath.Join(dir, "audit.jsonl")
	a := openLog(t, path)
	t.Cleanup(func() { a.Close() })
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, fsAppendFL); err != nil {
		t.Skipf("cannot make the log append-only here: %v", err)
	}
	t.Cleanup(func() { _ = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, 0) })
	filler := fillDisk(t, dir, 16<<10)

	failed := fillLog(t, a, 0)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	torn := len(data) - (bytes.LastIndexByte(data, '\n') + 1)
	if torn == 0 {
		t.Fatal("the failed write left nothing; this test needs a short write")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	writeEvents(t, a, failed, failed+1)
	lines := logLines(t, path)
	seg := fields(t, lines[len(lines)-2])
	if seg["reason"] != SegmentTornTail || seg["tornBytes"] != float64(torn) || fields(t, lines[len(lines)-1])["callId"] != "c"+strconv.Itoa(failed) {
		t.Errorf("after the short write of %d bytes:\n%s\n%s", torn, lines[len(lines)-2], lines[len(lines)-1])
	}
	v, err := verifyFile(t, path)
	if err != nil || v.SetAside != 1 || v.Events != failed+2 {
		t.Errorf("Verify = %+v, %v", v, err)
	}
}
