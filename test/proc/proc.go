// Package proc starts, watches and stops the real processes of the multi-process tests, the
// chaos run and the benchmark harness: each in its own process group, its output where the
// caller says, with waits that have deadlines and a group that stops everything it started. It
// does not import testing; test/harness adds the test's cleanup and failures.
package proc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Spec says what to run and where its output goes.
type Spec struct {
	Name string   // names the process in errors and logs
	Path string   // the binary
	Args []string // its arguments
	Env  []string // added to this process's environment (nil: the same environment)
	Dir  string   // its working folder ("": this process's)
	// Wrap is a command the process runs under, such as {"ip", "netns", "exec", NS}: then
	// Wrap[0] runs with Wrap[1:], Path and Args as its arguments. An exec-style wrapper such
	// as ip netns exec keeps the process id, so signals reach the binary itself.
	Wrap []string
	// Stdout and Stderr receive the output (nil discards it). An *os.File goes to the process
	// as it is, and Start closes its own copy once the process has started (or failed to);
	// any other writer gets the output a line at a time, so that one writer may take both
	// streams without splitting a line.
	Stdout, Stderr io.Writer
	// OnLine, when set, sees each line of stdout (without its newline), after Stdout got it.
	OnLine func(line string)
	// KillWithParent has the kernel send the process SIGKILL when the process that started it
	// dies (Linux's parent-death signal), so that a crashed harness leaves nothing running.
	KillWithParent bool
}

// Proc is one started process.
type Proc struct {
	Name string

	cmd  *exec.Cmd
	done chan struct{} // closed once the process has ended and its output is read
	err  error         // exec.Cmd.Wait's error, set before done closes
}

// Start starts the process of s in its own process group.
func Start(s Spec) (*Proc, error) {
	path, args := s.Path, s.Args
	if len(s.Wrap) > 0 {
		path, args = s.Wrap[0], append(append(append([]string(nil), s.Wrap[1:]...), s.Path), s.Args...)
	}
	cmd := exec.Command(path, args...)
	if s.Env != nil {
		cmd.Env = append(os.Environ(), s.Env...)
	}
	cmd.Dir = s.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if s.KillWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	files := ownFiles(s.Stdout, s.Stderr)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var readers []func()
	for _, out := range []struct {
		w      io.Writer
		onLine func(string)
		to     *io.Writer
		pipe   func() (io.ReadCloser, error)
	}{
		{s.Stdout, s.OnLine, &cmd.Stdout, cmd.StdoutPipe},
		{s.Stderr, nil, &cmd.Stderr, cmd.StderrPipe},
	} {
		if _, isFile := out.w.(*os.File); out.onLine == nil && (out.w == nil || isFile) {
			*out.to = out.w
			continue
		}
		r, err := out.pipe()
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", s.Name, err)
		}
		readers = append(readers, func() { copyLines(out.w, r, out.onLine) })
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	p := &Proc{Name: s.Name, cmd: cmd, done: make(chan struct{})}
	var wg sync.WaitGroup
	for _, read := range readers {
		wg.Go(read)
	}
	go func() {
		// Wait closes the pipes: read them to their end first.
		wg.Wait()
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// ownFiles returns the files among ws, each once.
func ownFiles(ws ...io.Writer) []*os.File {
	var fs []*os.File
	for _, w := range ws {
		if f, ok := w.(*os.File); ok && (len(fs) == 0 || fs[0] != f) {
			fs = append(fs, f)
		}
	}
	return fs
}

// copyLines writes what r gives to w (if not nil) a line at a time, and hands each line to
// onLine (if not nil), until r ends. Lines have no length limit: a process that prints a long
// line never blocks on a full pipe.
func copyLines(w io.Writer, r io.Reader, onLine func(string)) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			if w != nil {
				_, _ = io.WriteString(w, line)
			}
			if onLine != nil {
				onLine(strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"))
			}
		}
		if err != nil {
			return
		}
	}
}

// Pid is the process id (that of the wrapper, for a Wrap that forks).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is how the process ended (exec.Cmd.Wait's error: nil for exit status 0); nil while it
// runs.
func (p *Proc) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// Wait waits up to d for the process to end and returns its exit code (-1 if a signal killed
// it), or an error if it still runs or could not be waited for.
func (p *Proc) Wait(d time.Duration) (int, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		return 0, fmt.Errorf("%s still running after %v", p.Name, d)
	}
	if p.cmd.ProcessState == nil {
		return 0, p.err
	}
	return p.cmd.ProcessState.ExitCode(), nil
}

// Signal sends sig to the process (not its group); an error if it has ended.
func (p *Proc) Signal(sig os.Signal) error {
	if p.Exited() {
		return fmt.Errorf("%s: not running", p.Name)
	}
	return p.cmd.Process.Signal(sig)
}

// signalGroup sends sig to the process's group.
func (p *Proc) signalGroup(sig syscall.Signal) { _ = syscall.Kill(-p.Pid(), sig) }

// Kill sends SIGKILL to the process group (then SIGCONT, so that a stopped process dies at
// once) and waits for the process to end.
func (p *Proc) Kill() {
	if p.Exited() {
		return
	}
	p.signalGroup(syscall.SIGKILL)
	p.signalGroup(syscall.SIGCONT)
	<-p.done
}

// Stop ends the process: SIGTERM to its group, SIGKILL after grace. It reports whether the
// process had to be killed.
func (p *Proc) Stop(grace time.Duration) (killed bool) {
	return len(StopAll(grace, p)) > 0
}

// StopAll ends every one of ps: SIGTERM to each group, then SIGKILL to those still running
// after grace (one deadline for all). It waits for them to end and returns those it killed.
func StopAll(grace time.Duration, ps ...*Proc) (killed []*Proc) {
	for _, p := range ps {
		if !p.Exited() {
			p.signalGroup(syscall.SIGTERM)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	for _, p := range ps {
		select {
		case <-p.done:
		case <-ctx.Done():
		}
	}
	for _, p := range ps {
		if !p.Exited() {
			killed = append(killed, p)
			p.Kill()
		}
	}
	return killed
}
