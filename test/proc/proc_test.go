package proc

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/logbuf"
)

// sh starts sh -c script with s's other fields, and kills it when the test ends.
func sh(t *testing.T, s Spec, script string) *Proc {
	t.Helper()
	s.Path, s.Args = "sh", []string{"-c", script}
	if s.Name == "" {
		s.Name = "sh"
	}
	p, err := Start(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

func TestOutputLinesAndExit(t *testing.T) {
	var out logbuf.Buffer
	l := NewListening(2)
	p := sh(t, Spec{Stdout: &out, Stderr: &out, OnLine: l.Line, Env: []string{"MESHGW_PROC_TEST=env-ok"}},
		`echo "a listening on http://127.0.0.1:1 (mode x)"; echo err >&2; echo $MESHGW_PROC_TEST; echo "b listening on http://127.0.0.1:2"; exit 3`)
	urls, err := l.Wait(context.Background(), p, 10*time.Second)
	if err != nil || strings.Join(urls, " ") != "http://127.0.0.1:1 http://127.0.0.1:2" {
		t.Fatalf("urls %q, %v", urls, err)
	}
	code, err := p.Wait(10 * time.Second)
	if err != nil || code != 3 {
		t.Fatalf("exit %d, %v; want 3", code, err)
	}
	for _, want := range []string{"a listening on", "err\n", "env-ok\n", "b listening on"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q lacks %q", out.String(), want)
		}
	}
	if p.Err() == nil || p.Signal(os.Interrupt) == nil {
		t.Errorf("ended with status 3: Err %v, and Signal succeeded", p.Err())
	}
}

func TestListeningExited(t *testing.T) {
	l := NewListening(1)
	p := sh(t, Spec{OnLine: l.Line}, `echo starting; exit 1`)
	if _, err := l.Wait(context.Background(), p, 10*time.Second); !errors.Is(err, ErrExited) {
		t.Fatalf("%v, want ErrExited", err)
	}
	l = NewListening(1)
	p = sh(t, Spec{OnLine: l.Line}, `exec sleep 1000`)
	if _, err := l.Wait(context.Background(), p, 10*time.Millisecond); !errors.Is(err, ErrNoLine) {
		t.Fatalf("%v, want ErrNoLine", err)
	}
}

func TestWrapAndFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	for range 2 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Start(Spec{Name: "wrapped", Wrap: []string{"env", "WRAPPED=yes"}, Path: "sh",
			Args: []string{"-c", `echo "out $WRAPPED"; echo "err $WRAPPED" >&2`}, Stdout: f, Stderr: f})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); strings.Count(got, "out yes\n") != 2 || strings.Count(got, "err yes\n") != 2 {
		t.Fatalf("log %q: want each line twice", got)
	}
}

func TestStop(t *testing.T) {
	ready := func() (func(string), chan struct{}) {
		ch := make(chan struct{})
		return func(line string) {
			if line == "ready" {
				close(ch)
			}
		}, ch
	}
	var stubborn []*Proc
	for range 2 {
		onLine, ch := ready()
		stubborn = append(stubborn, sh(t, Spec{OnLine: onLine}, `trap "" TERM; echo ready; exec sleep 1000`))
		<-ch
	}
	polite := sh(t, Spec{}, `exec sleep 1000`)
	// Two processes ignore SIGTERM: both are killed after the one grace.
	killed := StopAll(50*time.Millisecond, append(stubborn, polite)...)
	if len(killed) != 2 || killed[0] != stubborn[0] || killed[1] != stubborn[1] || !polite.Exited() {
		t.Fatalf("killed %v, want the two that ignore SIGTERM; polite ended %v", killed, polite.Exited())
	}
	if p := sh(t, Spec{}, `exec sleep 1000`); p.Stop(10*time.Second) || !p.Exited() {
		t.Fatal("sleep needed SIGKILL")
	}
}

func TestGroup(t *testing.T) {
	var g Group
	for range 2 {
		if _, err := g.Start(Spec{Name: "sleep", Path: "sleep", Args: []string{"1000"}}); err != nil {
			t.Fatal(err)
		}
	}
	ps := g.Procs()
	g.Stop(10 * time.Second)
	if len(ps) != 2 || !ps[0].Exited() || !ps[1].Exited() || len(g.Procs()) != 0 {
		t.Fatalf("%d processes, still kept %d", len(ps), len(g.Procs()))
	}
	if _, err := g.Start(Spec{Name: "missing", Path: "/nonexistent/binary"}); err == nil {
		t.Fatal("started a missing binary")
	}
}

func TestUntil(t *testing.T) {
	n := 0
	if err := Until(context.Background(), 10*time.Second, time.Millisecond, "three calls", func() bool { n++; return n == 3 }); err != nil {
		t.Fatal(err)
	}
	err := Until(context.Background(), 10*time.Millisecond, time.Millisecond, "never", func() bool { return false })
	if err == nil || err.Error() != "timed out after 10ms waiting for never" {
		t.Fatalf("%v", err)
	}
}

func TestStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	if got := Status(srv.URL, "k"); got != http.StatusOK {
		t.Errorf("with the key: %d", got)
	}
	if got := Status(srv.URL, ""); got != http.StatusUnauthorized {
		t.Errorf("without: %d", got)
	}
	if got := Status("http://127.0.0.1:0/", ""); got != 0 {
		t.Errorf("no server: %d", got)
	}
}
