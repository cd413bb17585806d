package wan

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// inNamespace runs fn on an OS thread that has entered the network namespace ns, then returns
// the thread to this process's namespace. A socket or TUN device made in fn belongs to ns for
// good, wherever the descriptor is used afterwards. When the thread cannot go back, it is not
// unlocked, so the runtime ends it with the goroutine rather than reuse it in ns.
func inNamespace(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer home.Close()
		target, err := os.Open("/var/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter network namespace %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("leave network namespace %s: %w", ns, err) // the thread stays locked and ends
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// ip runs the ip command; its error carries the command and what it printed.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// removeNamespace kills what still runs in ns (only the test's own processes live there) and
// deletes it; a namespace that does not exist is no error.
func removeNamespace(ns string) {
	if _, err := os.Stat("/var/run/netns/" + ns); err != nil {
		return
	}
	if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			var pid int
			if _, err := fmt.Sscan(f, &pid); err == nil && pid > 0 {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
	}
	_ = ip("netns", "del", ns)
}

// Usable reports whether a simulated WAN can be made here (root, the ip command, /dev/net/tun),
// and if not, why, in a few words a skipped test can print.
func Usable() (bool, string) {
	if os.Geteuid() != 0 {
		return false, "not root: network namespaces need CAP_NET_ADMIN"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return false, "the ip command (iproute2) is not installed"
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return false, "/dev/net/tun is missing: the kernel has no TUN devices"
	}
	return true, ""
}
