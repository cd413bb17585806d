package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/meshgw/meshgw/test/proc"
)

// start runs bin with args (under wrap, such as ip netns exec, when set) in its own process
// group, appending its output to logPath: one log per process, kept across restarts, each start
// headed by a line.
func start(name, bin string, args, wrap []string, logPath string) (*proc.Proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	shown := args
	if len(wrap) > 0 {
		shown = append(append(append([]string(nil), wrap[1:]...), bin), args...)
	}
	fmt.Fprintf(f, "=== %s start %v\n", time.Now().Format(time.RFC3339Nano), shown)
	return proc.Start(proc.Spec{Name: name, Path: bin, Args: args, Wrap: wrap, Stdout: f, Stderr: f, KillWithParent: true})
}

// kill sends SIGKILL to p's group and waits for it to end; nothing when p never started.
func kill(p *proc.Proc) {
	if p != nil {
		p.Kill()
	}
}

// signal sends sig to p; an error when it does not run.
func signal(p *proc.Proc, sig syscall.Signal) error {
	if p == nil {
		return errors.New("not running")
	}
	return p.Signal(sig)
}

// waitFor polls cond every 50 ms until it holds, ctx ends, or d passes (proc.Until).
func waitFor(ctx context.Context, d time.Duration, what string, cond func() bool) error {
	return proc.Until(ctx, d, 50*time.Millisecond, what, cond)
}

// Status returns the status code of GET url with the bearer key (none when ""), 0 without an
// answer.
func Status(url, key string) int { return proc.Status(url, key) }
