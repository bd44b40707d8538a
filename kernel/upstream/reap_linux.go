package upstream

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// adoptOrphans makes the supervisor the subreaper of everything the
// upstream starts (PR_SET_CHILD_SUBREAPER): a descendant whose parent
// exits is given to the supervisor rather than to init, also one that
// left the upstream's process group (setsid, setpgid) or daemonized with
// a double fork. It reports whether that worked.
func adoptOrphans() bool {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == nil
}

// maxSweeps bounds endAdopted's rounds: each round kills every child the
// supervisor has, whose own children it then adopts.
const maxSweeps = 64

// endAdopted kills every child of the supervisor but keep (the upstream,
// which its own Wait reaps), and reaps them, round after round until none
// is left: killing a process gives its children to the supervisor, the
// next round's. A descendant that forks faster than it is killed for
// maxSweeps rounds is left; the process group kill has ended the rest.
func endAdopted(keep int) {
	self := os.Getpid()
	for range maxSweeps {
		kids := children(self, keep)
		if len(kids) == 0 {
			return
		}
		for _, pid := range kids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, pid := range kids {
			var ws syscall.WaitStatus
			for {
				if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
					break
				}
			}
		}
	}
}

// reapAdopted reaps the adopted children that have exited, so they do
// not stay zombies while the upstream runs; keep is left to its Wait.
func reapAdopted(keep int) {
	for _, pid := range children(os.Getpid(), keep) {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	}
}

// children lists the processes whose parent is pid, but keep.
func children(pid, keep int) []int {
	dir, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil
	}
	var out []int
	for _, n := range names {
		child, err := strconv.Atoi(n)
		if err != nil || child == keep {
			continue
		}
		stat, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue
		}
		// The parent's pid is the second field after the command name,
		// which is in parentheses and may hold anything.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}
