// Package cluster starts and faults the processes of a chaos run: N meshgw gateways and M
// fakeworker engines, each on its own 127.0.0.x address inside a network namespace (or on the
// host's 127.0.0.1 with distinct ports), with kill -9, SIGSTOP/SIGCONT, restarts on the same
// state directory, state-directory loss, and iptables partitions.
package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// proc is one running process; its output goes to a log file kept across restarts.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// start runs bin with args in its own process group, appending its output to logPath.
func start(bin string, args []string, logPath string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "=== %s start %v\n", time.Now().Format(time.RFC3339Nano), args)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL to the process group (SIGCONT first, so that a stopped process dies) and
// waits for the process to end.
func (p *proc) kill() {
	if p == nil || p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
	<-p.done
}

func (p *proc) signal(sig syscall.Signal) error {
	if p == nil || p.exited() {
		return fmt.Errorf("not running")
	}
	return p.cmd.Process.Signal(sig)
}

// quick is the client of the harness's own waits and reads.
var quick = &http.Client{Timeout: 2 * time.Second}

// status returns the status code of GET url, 0 without an answer.
func status(url string) int {
	resp, err := quick.Get(url)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// waitFor polls cond every 50 ms until it holds, ctx ends, or d passes.
func waitFor(ctx context.Context, d time.Duration, what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not within %v", what, d)
		case <-tick.C:
		}
	}
	return nil
}

// Status returns the status code of GET url with the bearer key (none when ""), 0 without an
// answer.
func Status(url, key string) int {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := quick.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
