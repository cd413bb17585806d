package e2e

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/meshgw/meshgw/test/harness"
)

// amnesiaWrites is how many registrations the amnesia test has acknowledged while C lags.
const amnesiaWrites = 20

// TestWipedVoterLosesNoAcknowledgedWrite is the amnesia sequence: follower C is
// paused (SIGSTOP); 20 registrations are acknowledged through the leader A, stored by A and B
// only; B is killed and its state directory wiped; A is killed; C resumes and B restarts empty
// under its old id. B must not vote C, whose log lacks the 20 writes, into leadership: it is a
// new incarnation and refuses every vote until a leader confirmed it caught up. Once A
// restarts, A leads, B is removed, re-added as a non-voter and promoted after catching up, and
// every gateway lists all 20 workers.
func TestWipedVoterLosesNoAcknowledgedWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	gws := []*clusterGW{newClusterGW(t, "aa"), newClusterGW(t, "ab"), newClusterGW(t, "ac")}
	ga, gb, gc := gws[0], gws[1], gws[2]
	ga.start(t, b)
	gb.start(t, b, ga.meshAddr())
	gc.start(t, b, ga.meshAddr())
	if leader := waitFormed(t, gws...); leader != ga.id {
		t.Fatalf("the leader is %s, want %s (it bootstrapped the cluster)", leader, ga.id)
	}

	if err := gc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP to %s: %v", gc.id, err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = gc.Signal(syscall.SIGCONT)
		}
	})
	// Once A no longer counts C alive, a fleet-acknowledged write does not wait for it.
	harness.WaitFor(t, clusterBound, ga.id+" no longer counts the paused "+gc.id+" alive", func() bool {
		s := peerStatus(t, ga, gc.id)
		return s != "" && s != "alive"
	})
	a := newAdmin(ga.Gateway, "")
	urls := make([]string, amnesiaWrites)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://127.0.0.1:%d", 20000+i) // nothing listens: records only
		a.must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, urls[i]))
	}

	gb.Kill()
	if err := os.RemoveAll(gb.dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(gb.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ga.Kill()
	if err := gc.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT to %s: %v", gc.id, err)
	}
	resumed = true
	gb.start(t, b, gc.meshAddr(), ga.meshAddr())

	// Without the guard C wins B's vote within a few election timeouts; with it B says it refused.
	const refused = "refused a vote"
	harness.WaitFor(t, clusterBound, gb.id+" refuses C's vote, or C leads", func() bool {
		l := leaderOf(t, gc)
		return strings.Contains(gb.Output(), refused) || (l != "" && l != ga.id)
	})
	if l := leaderOf(t, gc); l != "" && l != ga.id {
		t.Errorf("%s leads with the wiped %s's vote; its log lacks the %d acknowledged writes", l, gb.id, amnesiaWrites)
	}

	ga.start(t, b, gc.meshAddr())
	waitFormed(t, gws...)
	for _, g := range gws {
		harness.WaitFor(t, clusterBound, fmt.Sprintf("%s lists the %d acknowledged workers", g.id, amnesiaWrites), func() bool {
			for _, u := range urls {
				if found, _ := hasWorker(t, g, u); !found {
					return false
				}
			}
			return true
		})
	}
	for _, g := range gws {
		for _, line := range strings.Split(g.Output(), "\n") {
			if strings.Contains(line, refused) || strings.Contains(line, "new incarnation") || strings.Contains(line, "votes again") {
				t.Logf("%s: %.400s", g.id, line)
			}
		}
	}
	if !strings.Contains(ga.Output(), "new incarnation") {
		t.Errorf("the leader %s did not log that %s came back as a new incarnation", ga.id, gb.id)
	}
}

// peerStatus is the status g's /mesh/peers gives id, "" when g did not answer or lists no id.
func peerStatus(t *testing.T, g *clusterGW, id string) string {
	t.Helper()
	var p peersAnswer
	if !getJSON(t, g, "/mesh/peers", &p) {
		return ""
	}
	for _, peer := range p.Peers {
		if peer.ID == id {
			return peer.Status
		}
	}
	return ""
}
