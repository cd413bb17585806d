package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// clusterBound bounds each wait of the cluster tests: a join, an election, a catch-up.
const clusterBound = 20 * time.Second

// clusterGW is one gateway of a cluster test with what a restart on the same state needs.
type clusterGW struct {
	*harness.Gateway
	id, dir                     string
	meshPort, raftPort, rpcPort int
	extra                       []string
}

func newClusterGW(t *testing.T, id string, extra ...string) *clusterGW {
	return &clusterGW{id: id, dir: t.TempDir(), meshPort: harness.FreePort(t), raftPort: harness.FreePort(t),
		rpcPort: harness.FreePort(t), extra: extra}
}

func (g *clusterGW) meshAddr() string { return "127.0.0.1:" + strconv.Itoa(g.meshPort) }

// start runs the gateway on its state dir and ports, with join (mesh addresses) if any.
func (g *clusterGW) start(t *testing.T, b harness.Bins, join ...string) {
	t.Helper()
	args := []string{"--node-id", g.id, "--state-dir", g.dir, "--mesh-port", strconv.Itoa(g.meshPort),
		"--raft-port", strconv.Itoa(g.raftPort), "--rpc-port", strconv.Itoa(g.rpcPort), "--mesh-profile", "local",
		"--shutdown-settle-secs", "0", "--health-check-interval-secs", "1"}
	for _, j := range join {
		args = append(args, "--join", j)
	}
	g.Gateway = harness.StartGateway(t, b, g.id, append(args, g.extra...)...)
}

type peersAnswer struct {
	Peers []struct{ ID, Status, Raft string } `json:"peers"`
}

type raftAnswer struct {
	Leader       string                          `json:"leader"`
	Servers      []struct{ ID, Suffrage string } `json:"servers"`
	VotersWanted int                             `json:"voters_wanted"`
}

func getJSON(t *testing.T, g *clusterGW, path string, v any) bool {
	t.Helper()
	code, body := newAdmin(g.Gateway, "").do(t, "GET", path, "")
	return code == 200 && json.Unmarshal([]byte(body), v) == nil
}

// waitFormed waits until every gateway lists every other alive, sees the same leader, every
// gateway in the raft configuration and as many voters as it wants (by default chosen by the
// fleet's size: 1 of 2 gateways, 3 of 3).
func waitFormed(t *testing.T, gws ...*clusterGW) string {
	t.Helper()
	var leader string
	harness.WaitFor(t, clusterBound, fmt.Sprintf("%d alive peers in the raft configuration, with the voters wanted, on each gateway", len(gws)), func() bool {
		leader = ""
		for _, g := range gws {
			var p peersAnswer
			var r raftAnswer
			if !getJSON(t, g, "/mesh/peers", &p) || !getJSON(t, g, "/mesh/raft", &r) || r.Leader == "" {
				return false
			}
			alive, voters := 0, 0
			for _, peer := range p.Peers {
				if peer.Status == "alive" {
					alive++
				}
			}
			for _, s := range r.Servers {
				if s.Suffrage == "voter" {
					voters++
				}
			}
			if alive != len(gws) || len(r.Servers) != len(gws) || r.VotersWanted == 0 || voters != r.VotersWanted ||
				(leader != "" && r.Leader != leader) {
				return false
			}
			leader = r.Leader
		}
		return true
	})
	return leader
}

// hasWorker reports whether g's GET /workers lists u, and its disabled flag.
func hasWorker(t *testing.T, g *clusterGW, u string) (found, disabled bool) {
	t.Helper()
	var list struct {
		Workers []struct {
			URL      string `json:"url"`
			Disabled bool   `json:"disabled"`
		} `json:"workers"`
	}
	if !getJSON(t, g, "/workers", &list) {
		return false, false
	}
	for _, w := range list.Workers {
		if w.URL == u {
			return true, w.Disabled
		}
	}
	return false, false
}

// TestClusterJoinForwardFailover: g2 and g3 join g1; the three form one raft group of three
// voters; a write to a follower is forwarded and reaches every gateway; the leader is killed
// with SIGKILL, the others elect a leader and take writes; the killed gateway restarts on its
// state directory, rejoins and catches up.
func TestClusterJoinForwardFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	start := time.Now()
	b := harness.Build(t)
	engine := harness.StartEngine(t, b, "engine-cluster")
	gws := []*clusterGW{newClusterGW(t, "g1"), newClusterGW(t, "g2"), newClusterGW(t, "g3")}
	gws[0].start(t, b)
	gws[1].start(t, b, gws[0].meshAddr())
	gws[2].start(t, b, gws[0].meshAddr())
	leaderID := waitFormed(t, gws...)
	t.Logf("formed in %v; leader %s", time.Since(start).Round(time.Millisecond), leaderID)

	// A registration sent to a follower is forwarded to the leader and reaches every gateway.
	follower := gws[2]
	if follower.id == leaderID {
		follower = gws[1]
	}
	newAdmin(follower.Gateway, "").must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, engine.URL))
	for _, g := range gws {
		harness.WaitFor(t, clusterBound, g.id+" lists the worker registered through "+follower.id, func() bool {
			found, _ := hasWorker(t, g, engine.URL)
			return found
		})
	}

	// Every gateway routes to it: its owner once its probes pass, the others because they
	// import it while its owner is alive in the mesh (docs/choices.md).
	client := &http.Client{Timeout: 5 * time.Second}
	for _, g := range gws {
		harness.WaitFor(t, clusterBound, g.id+" serves a chat through the worker owned by "+follower.id, func() bool {
			code, _, err := chat(client, g.URL, "hello from "+g.id)
			return err == nil && code == 200
		})
	}

	// Kill the leader: the two others elect one and take a write through either of them.
	var killed *clusterGW
	var rest []*clusterGW
	for _, g := range gws {
		if g.id == leaderID {
			killed = g
		} else {
			rest = append(rest, g)
		}
	}
	killed.Kill()
	killedAt := time.Now()
	harness.WaitFor(t, clusterBound, "a new leader among "+rest[0].id+" and "+rest[1].id, func() bool {
		var r raftAnswer
		return getJSON(t, rest[0], "/mesh/raft", &r) && r.Leader != "" && r.Leader != killed.id
	})
	path := "/workers/" + url.PathEscape(engine.URL)
	harness.WaitFor(t, clusterBound, "a disable through "+rest[1].id, func() bool {
		code, _ := newAdmin(rest[1].Gateway, "").do(t, "PUT", path, `{"disabled":true,"reason":"cluster test"}`)
		return code == 200
	})
	t.Logf("write accepted %v after the kill", time.Since(killedAt).Round(time.Millisecond))
	for _, g := range rest {
		harness.WaitFor(t, clusterBound, g.id+" shows the disable", func() bool {
			_, disabled := hasWorker(t, g, engine.URL)
			return disabled
		})
	}

	// Restart the killed gateway on its state directory: it rejoins and catches up.
	killed.start(t, b, rest[0].meshAddr())
	harness.WaitFor(t, clusterBound, killed.id+" shows the disable after its restart", func() bool {
		_, disabled := hasWorker(t, killed, engine.URL)
		return disabled
	})
	waitFormed(t, gws...)
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// TestClusterBootstrapExpect: three new gateways started with --bootstrap-expect 3 and --join
// each other form one cluster of three voters.
func TestClusterBootstrapExpect(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	start := time.Now()
	b := harness.Build(t)
	gws := []*clusterGW{
		newClusterGW(t, "b1", "--bootstrap-expect", "3"),
		newClusterGW(t, "b2", "--bootstrap-expect", "3"),
		newClusterGW(t, "b3", "--bootstrap-expect", "3"),
	}
	for i, g := range gws {
		var join []string
		for j, o := range gws {
			if j != i {
				join = append(join, o.meshAddr())
			}
		}
		g.start(t, b, join...)
	}
	leader := waitFormed(t, gws...)
	t.Logf("formed in %v; leader %s", time.Since(start).Round(time.Millisecond), leader)
}
