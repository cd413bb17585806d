package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestDrainPrintsProgress: while the gateway's answer to the drain is pending, meshctl prints a
// line each time what is left changes (and not when it stays the same), then the result.
func TestDrainPrintsProgress(t *testing.T) {
	drainProgressEvery = 5 * time.Millisecond
	t.Cleanup(func() { drainProgressEvery = time.Second })
	var reads atomic.Int64
	enough := make(chan struct{}) // closed at the read after the last change: every line is out
	progress := []string{
		`{"draining": [{"peer": "blue1", "status": "alive", "owned": 2, "raft": "voter", "leader": true}]}`,
		`{"draining": [{"peer": "blue1", "status": "alive", "owned": 2, "raft": "voter", "leader": true}]}`,
		`{"draining": [{"peer": "blue1", "status": "alive", "owned": 0, "raft": "nonvoter"}]}`,
		`{"draining": [{"peer": "blue1", "status": "left", "done": true}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.Method + " " + r.URL.Path {
		case "GET /mesh/drain":
			n := reads.Add(1) - 1
			if n == int64(len(progress)) {
				close(enough)
			}
			io.WriteString(w, progress[min(int(n), len(progress)-1)])
		case "GET /mesh/raft":
			leader := "blue1"
			if reads.Load() > 2 {
				leader = "green1"
			}
			io.WriteString(w, `{"leader": "`+leader+`", "servers": [{"id": "green1", "suffrage": "voter"}]}`)
		case "POST /mesh/drain":
			select { // the fake gateway's drain answers once its progress was read
			case <-enough:
			case <-time.After(10 * time.Second):
			}
			io.WriteString(w, `{"peers": ["blue1"], "moved": 2, "stuck": [], "done": true,
 "states": [{"peer": "blue1", "status": "left", "done": true}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	code, stdout, stderr := runCLI(t, srv.URL, nil, "drain", "blue1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := []string{
		"progress: blue1: 2 workers, leader, voter, in the mesh; leader blue1, voters green1",
		"progress: blue1: nonvoter, in the mesh; leader green1, voters green1",
		"progress: blue1: done; leader green1, voters green1",
		"drained blue1: moved 2 workers",
	}
	at := 0
	for _, line := range strings.Split(stdout, "\n") {
		if at < len(want) && line == want[at] {
			at++
		}
	}
	if at != len(want) || strings.Count(stdout, "progress: blue1: 2 workers") != 1 {
		t.Errorf("stdout:\n%s\nwant, in order:\n%s", stdout, strings.Join(want, "\n"))
	}
}
