package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// TestDrainedGatewayRestartedAtOnce: a drained gateway started
// again on its state directory before the leader cleared its drain mark (a process supervisor
// with Restart=always does it) must come back as a new member: its mark cleared, back in the
// raft configuration (a non-voter promoted to the third voter seat), serving admin writes, and
// taking ownership again. Three gateways; a follower is drained, then killed and started again
// at once:
//
//   - after_done: as soon as the drain answered 200 done (the leader saw it leave and removed it
//     from the configuration; its mark is cleared at the leader's next pass);
//   - while_leaving: the moment it logs that it leaves the mesh, before the leader may have seen
//     the leave (it may see the gateway dead, still a non-voter of the configuration).
func TestDrainedGatewayRestartedAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	for _, tc := range []struct {
		name         string
		whileLeaving bool
	}{
		{name: "after_done"},
		{name: "while_leaving", whileLeaving: true},
	} {
		t.Run(tc.name, func(t *testing.T) { drainRestart(t, tc.whileLeaving) })
	}
}

// threeWithRoles starts three gateways named prefix1 to prefix3 (with extra flags), the second
// and third joining the first, waits until they formed, and returns them with their roles: the
// raft leader, a follower to drain or stop (the victim) and the other follower.
func threeWithRoles(t *testing.T, b harness.Bins, prefix string, extra ...string) (gws []*clusterGW, leader, victim, other *clusterGW) {
	t.Helper()
	for i := range 3 {
		gws = append(gws, newClusterGW(t, fmt.Sprintf("%s%d", prefix, i+1), extra...))
	}
	gws[0].start(t, b)
	gws[1].start(t, b, gws[0].meshAddr())
	gws[2].start(t, b, gws[0].meshAddr())
	leaderID := waitFormed(t, gws...)
	for _, g := range gws {
		switch {
		case g.id == leaderID:
			leader = g
		case victim == nil:
			victim = g
		default:
			other = g
		}
	}
	return gws, leader, victim, other
}

// drainRestart runs one case of TestDrainedGatewayRestartedAtOnce.
func drainRestart(t *testing.T, whileLeaving bool) {
	b := harness.Build(t)
	// A short drain timeout: in while_leaving the drain's answer does not wait for a gateway
	// that came back (it answers 202 then); the test does not judge that answer.
	gws, leader, victim, other := threeWithRoles(t, b, "s", "--drain-timeout-secs", "8")
	// Each gateway owns two workers (nothing listens: ownership needs no engine).
	urls := map[string][]string{}
	for _, g := range gws {
		for range 2 {
			u := fmt.Sprintf("http://127.0.0.1:%d", harness.FreePort(t))
			newAdmin(g.Gateway, "").must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, u))
			urls[g.id] = append(urls[g.id], u)
		}
	}
	t.Logf("leader %s; draining %s", leader.id, victim.id)

	drainAt := time.Now()
	var answer sync.WaitGroup
	var drainCode int
	var drainBody string
	var drainErr error
	answer.Go(func() { drainCode, drainBody, drainErr = postDrain(leader.URL, victim.id) })
	if whileLeaving {
		harness.WaitFor(t, clusterBound, victim.id+" logs that it leaves the mesh", func() bool {
			return strings.Contains(victim.Output(), "drained: leaving the mesh")
		})
	} else {
		answer.Wait()
		if drainErr != nil || drainCode != 200 || !strings.Contains(drainBody, `"done":true`) {
			t.Fatalf("POST /mesh/drain %s: %d %s %v", victim.id, drainCode, drainBody, drainErr)
		}
	}
	victim.Kill()
	stopped := time.Now()
	victim.start(t, b, leader.meshAddr(), other.meshAddr())
	t.Logf("%s drained %v after the request, stopped, and answering again %v after it stopped",
		victim.id, stopped.Sub(drainAt).Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))

	// Its mark is cleared on every gateway, and it is back: three alive peers, three voters.
	for _, g := range gws {
		harness.WaitFor(t, clusterBound, g.id+" no longer lists "+victim.id+" in GET /mesh/drain", func() bool {
			var d struct {
				Draining []struct{ Peer string } `json:"draining"`
			}
			return getJSON(t, g, "/mesh/drain", &d) && len(d.Draining) == 0
		})
	}
	waitFormed(t, gws...)
	t.Logf("%s is a voter again %v after it stopped", victim.id, time.Since(stopped).Round(time.Millisecond))

	// Admin writes through it work, and it takes ownership again: a registration through it,
	// and a transfer to it of one of the leader's workers through the third gateway.
	u := fmt.Sprintf("http://127.0.0.1:%d", harness.FreePort(t))
	harness.WaitFor(t, clusterBound, "a registration through "+victim.id, func() bool {
		code, _ := newAdmin(victim.Gateway, "").do(t, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, u))
		return code == 201
	})
	moved := urls[leader.id][0]
	code, body := newAdmin(other.Gateway, "").do(t, "POST", "/workers/"+workerRef(moved)+"/transfer", fmt.Sprintf(`{"to":%q}`, victim.id))
	if code != http.StatusOK {
		t.Fatalf("transfer of %s to %s through %s: %d %s", moved, victim.id, other.id, code, body)
	}
	for _, g := range gws {
		for _, w := range []string{u, moved} {
			harness.WaitFor(t, clusterBound, g.id+" shows "+w+" owned by "+victim.id, func() bool {
				v, ok := workerOn(t, g, w)
				return ok && v.Owner == victim.id
			})
		}
	}
	if reason := readinessReason(t, victim); reason == "draining" {
		t.Errorf("the restarted %s answers /readiness %q", victim.id, reason)
	}
	answer.Wait()
	if whileLeaving {
		var ans struct{ Done bool }
		_ = json.Unmarshal([]byte(drainBody), &ans)
		t.Logf("the drain answered %d (done %v) %v", drainCode, ans.Done, drainErr)
	}
}

// TestDrainOfAStoppedGateway: a drained
// gateway the mesh declares dead rather than left (stopped, or cut off, before its leave is
// heard) stayed a non-voter of the raft configuration for --dead-voter-grace (60 s), so its mark
// outlived the 45 s the chaos harness waits. A follower is stopped (SIGSTOP) and drained through
// the leader: its workers move, its seat is given away, and once the mesh declares it dead the
// leader removes it at once; the drain answers 200 done. Resumed, the gateway (which never saw
// its mark) joins as a new member: a voter again, serving admin writes and taking a transfer.
func TestDrainOfAStoppedGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	gws, leader, victim, other := threeWithRoles(t, b, "p", "--drain-timeout-secs", "30")
	var leaderWorker string
	for _, g := range gws {
		for range 2 {
			u := fmt.Sprintf("http://127.0.0.1:%d", harness.FreePort(t))
			newAdmin(g.Gateway, "").must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, u))
			if g == leader {
				leaderWorker = u
			}
		}
	}
	if err := victim.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	code, body, err := postDrain(leader.URL, victim.id)
	if err != nil || code != http.StatusOK || !strings.Contains(body, `"done":true`) {
		t.Fatalf("POST /mesh/drain of the stopped %s: %d %s %v", victim.id, code, body, err)
	}
	t.Logf("the drain of the stopped %s answered 200 done %v after it stopped", victim.id, time.Since(stopped).Round(time.Millisecond))
	for _, g := range []*clusterGW{leader, other} {
		harness.WaitFor(t, clusterBound, g.id+" no longer lists "+victim.id+" in GET /mesh/drain", func() bool {
			var d struct {
				Draining []struct{ Peer string } `json:"draining"`
			}
			return getJSON(t, g, "/mesh/drain", &d) && len(d.Draining) == 0
		})
	}
	var owners struct {
		Owners []struct{ Worker, Owner string } `json:"owners"`
	}
	if !getJSON(t, leader, "/mesh/owners", &owners) || len(owners.Owners) != 6 {
		t.Fatalf("GET /mesh/owners: %+v", owners)
	}
	for _, o := range owners.Owners {
		if o.Owner == victim.id {
			t.Errorf("%s still owns %s after its drain", victim.id, o.Worker)
		}
	}

	if err := victim.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	waitFormed(t, gws...)
	t.Logf("the resumed %s is a voter again %v after SIGCONT", victim.id, time.Since(resumed).Round(time.Millisecond))
	u := fmt.Sprintf("http://127.0.0.1:%d", harness.FreePort(t))
	harness.WaitFor(t, clusterBound, "a registration through "+victim.id, func() bool {
		code, _ := newAdmin(victim.Gateway, "").do(t, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, u))
		return code == 201
	})
	code, body = newAdmin(other.Gateway, "").do(t, "POST", "/workers/"+workerRef(leaderWorker)+"/transfer", fmt.Sprintf(`{"to":%q}`, victim.id))
	if code != http.StatusOK {
		t.Fatalf("transfer of %s to %s through %s: %d %s", leaderWorker, victim.id, other.id, code, body)
	}
	// It never withdrew its readiness: it does not say draining (it says that no worker is
	// healthy: nothing listens behind them).
	if reason := readinessReason(t, victim); reason == "draining" {
		t.Errorf("the resumed %s answers /readiness %q", victim.id, reason)
	}
}

// readinessReason returns the reason of g's /readiness answer, "" when ready.
func readinessReason(t *testing.T, g *clusterGW) string {
	t.Helper()
	resp, err := http.Get(g.URL + "/readiness")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Reason string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Reason
}

// postDrain sends POST /mesh/drain {"peer": peer} to the gateway at base and waits for its
// answer (a drain answers once done, or after --drain-timeout-secs). It calls no t method: it
// runs beside the test.
func postDrain(base, peer string) (int, string, error) {
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Post(base+"/mesh/drain", "application/json", strings.NewReader(fmt.Sprintf(`{"peer":%q}`, peer)))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
