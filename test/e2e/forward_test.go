package e2e

import (
	"fmt"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// TestForwardFollowsNewLeader: the raft leader of three gateways is paused with SIGSTOP. One
// second later (before the followers notice), a disable is sent to a follower that already has a
// connection to the leader, and a registration to the other follower. Both are forwarded to the
// paused leader, which never answers; both must succeed on the leader the other two elect, within
// the admin writes' 10 s, and not answer outcome_unknown (DESIGN.md section 3).
// Once the old leader resumes, every gateway shows both writes.
func TestForwardFollowsNewLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	start := time.Now()
	b := harness.Build(t)
	e1 := harness.StartEngine(t, b, "engine-fwd-1")
	e2 := harness.StartEngine(t, b, "engine-fwd-2")
	gws := []*clusterGW{newClusterGW(t, "p1"), newClusterGW(t, "p2"), newClusterGW(t, "p3")}
	gws[0].start(t, b)
	gws[1].start(t, b, gws[0].meshAddr())
	gws[2].start(t, b, gws[0].meshAddr())
	leaderID := waitFormed(t, gws...)
	t.Logf("formed in %v; leader %s", time.Since(start).Round(time.Millisecond), leaderID)

	var leader *clusterGW
	var followers []*clusterGW
	for _, g := range gws {
		if g.id == leaderID {
			leader = g
		} else {
			followers = append(followers, g)
		}
	}
	// A write through the first follower opens its connection to the leader's --rpc-port: the
	// write after the pause then goes down a connection that stays open and never answers.
	newAdmin(followers[0].Gateway, "").must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, e1.URL))
	for _, g := range gws {
		harness.WaitFor(t, clusterBound, g.id+" lists the first worker", func() bool {
			found, _ := hasWorker(t, g, e1.URL)
			return found
		})
	}

	var once sync.Once
	resume := func() {
		once.Do(func() {
			if err := leader.Signal(syscall.SIGCONT); err != nil {
				t.Logf("SIGCONT to %s: %v", leader.id, err)
			}
		})
	}
	t.Cleanup(resume) // runs before the harness kills the gateway (cleanups run last in, first out)
	if err := leader.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP to %s: %v", leader.id, err)
	}
	paused := time.Now()
	// The scenario's delay, not a wait for a condition: the writes are issued 1 s after the
	// pause, before the followers' raft notices that the leader is silent.
	time.Sleep(time.Second)

	writes := []struct {
		name, method, path, body string
		via                      *clusterGW
	}{
		{"disable", "PUT", "/workers/" + url.PathEscape(e1.URL), `{"disabled":true,"reason":"forward test"}`, followers[0]},
		{"register", "POST", "/workers", fmt.Sprintf(`{"url":%q}`, e2.URL), followers[1]},
	}
	type answer struct {
		code int
		body string
		took time.Duration
	}
	answers := make([]answer, len(writes))
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := time.Now()
			code, body := newAdmin(w.via.Gateway, "").do(t, w.method, w.path, w.body)
			answers[i] = answer{code, body, time.Since(sent)}
		}()
	}
	wg.Wait()
	for i, w := range writes {
		a := answers[i]
		t.Logf("%s through %s, 1 s after pausing %s: %d in %v", w.name, w.via.id, leader.id, a.code, a.took.Round(time.Millisecond))
		if a.code < 200 || a.code > 299 {
			t.Errorf("%s through %s: %d %s; want 2xx from the new leader", w.name, w.via.id, a.code, a.body)
		}
		if a.took > 10*time.Second {
			t.Errorf("%s through %s took %v; want at most the admin writes' 10 s", w.name, w.via.id, a.took)
		}
	}
	var r raftAnswer
	if getJSON(t, followers[0], "/mesh/raft", &r) {
		t.Logf("leader after the pause: %q (%v after it)", r.Leader, time.Since(paused).Round(time.Millisecond))
	}

	// The old leader resumes, steps down and catches up: every gateway shows both writes.
	resume()
	for _, g := range gws {
		harness.WaitFor(t, clusterBound, g.id+" shows the disable and the second worker", func() bool {
			_, disabled := hasWorker(t, g, e1.URL)
			found, _ := hasWorker(t, g, e2.URL)
			return disabled && found
		})
	}
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}
