package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"sync"
	"time"
)

// Until polls cond every tick until it holds (nil), within passes or ctx ends (an error naming
// what was awaited). It checks cond at once, so a condition that holds costs no tick.
func Until(ctx context.Context, within, tick time.Duration, what string, cond func() bool) error {
	if cond() {
		return nil
	}
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("timed out after %v waiting for %s", within, what)
		case <-t.C:
			if cond() {
				return nil
			}
		}
	}
}

// quick is the client of the readiness checks.
var quick = &http.Client{Timeout: 2 * time.Second}

// Status returns the status code of GET url, with the bearer key unless it is "", and 0 when
// no answer came within 2 s.
func Status(url, bearer string) int {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := quick.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

var listenLine = regexp.MustCompile(`listening on (\S+)`)

// Listening collects the URLs a process prints on stdout in lines "... listening on URL ...",
// as fakeworker and the benchmark's upstream and minproxy do once a listener is up. Its Line
// is the process's Spec.OnLine.
type Listening struct {
	n     int
	mu    sync.Mutex
	urls  []string
	ready chan struct{} // closed once n URLs came
}

// NewListening waits for n URLs.
func NewListening(n int) *Listening { return &Listening{n: n, ready: make(chan struct{})} }

// Line reads one line of the process's stdout.
func (l *Listening) Line(line string) {
	m := listenLine.FindStringSubmatch(line)
	if m == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.urls) < l.n {
		l.urls = append(l.urls, m[1])
		if len(l.urls) == l.n {
			close(l.ready)
		}
	}
}

// Wait waits up to d for the URLs of p. It returns ErrExited if p ended first, ErrNoLine if d
// passed, and ctx's error if ctx ended.
func (l *Listening) Wait(ctx context.Context, p *Proc, d time.Duration) ([]string, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.ready:
		return l.got(), nil
	case <-p.Done():
		// Its output is read before Done closes: a process that printed its URLs and then
		// ended has them.
		select {
		case <-l.ready:
			return l.got(), nil
		default:
			return nil, ErrExited
		}
	case <-t.C:
		return nil, ErrNoLine
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *Listening) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.urls
}

var (
	// ErrExited is what a wait for a process's readiness returns when the process ended first.
	ErrExited = errors.New("exited")
	// ErrNoLine is what Listening.Wait returns when the process printed no URL in time.
	ErrNoLine = errors.New("no listening line")
)

// Build compiles the Go packages pkgs of the module in root into the folder dir.
func Build(root, dir string, pkgs ...string) error {
	cmd := exec.Command("go", append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}
