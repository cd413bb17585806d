package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// handoffBound bounds a drain: the moves, the leadership transfer, the voter changes and the
// drained gateways' leave, each a raft entry or a gossip round with --mesh-profile local.
const handoffBound = 60 * time.Second

// blueGreen is the fleet of the blue/green tests: three blue gateways that own four engines, one
// disabled and one failing its probes, and three green gateways that joined.
type blueGreen struct {
	b           harness.Bins
	blue, green []*clusterGW
	engines     []*harness.Proc
	disabled    string // the disabled engine's URL
	failing     string // the URL of the engine that fails its probes
}

// startBlueGreen runs steps 1 to 3 of the rollout: blue (with blueArgs) takes the engines, one
// is disabled and one fails its probes, and green joins.
func startBlueGreen(t *testing.T, blueArgs ...string) *blueGreen {
	t.Helper()
	f := &blueGreen{b: harness.Build(t)}
	for i := range 4 {
		f.engines = append(f.engines, harness.StartEngine(t, f.b, fmt.Sprintf("engine-%d", i)))
	}
	for i := range 3 {
		f.blue = append(f.blue, newClusterGW(t, fmt.Sprintf("blue%d", i+1), append([]string{"--color", "blue"}, blueArgs...)...))
	}
	f.blue[0].start(t, f.b)
	f.blue[1].start(t, f.b, f.blue[0].meshAddr())
	f.blue[2].start(t, f.b, f.blue[0].meshAddr())
	waitFormed(t, f.blue...)
	// Each blue gateway registers some engines, and owns them.
	for i, e := range f.engines {
		newAdmin(f.blue[i%3].Gateway, "").must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, e.URL))
	}
	f.disabled, f.failing = f.engines[0].URL, f.engines[1].URL
	newAdmin(f.blue[1].Gateway, "").must(t, 200, "PUT", "/workers/"+workerRef(f.disabled), `{"disabled":true,"reason":"blue/green test"}`)
	fault(t, f.engines[1], `{"health_status":500}`)
	for _, g := range f.blue {
		harness.WaitFor(t, clusterBound, g.id+" sees the failing engine not_ready and the others ready", func() bool {
			return f.healthIs(t, g, map[string]string{f.failing: "not_ready", f.engines[2].URL: "ready", f.engines[3].URL: "ready"})
		})
	}
	for i := range 3 {
		g := newClusterGW(t, fmt.Sprintf("green%d", i+1), "--color", "green")
		g.start(t, f.b, f.blue[0].meshAddr())
		f.green = append(f.green, g)
	}
	for _, g := range f.green {
		harness.WaitFor(t, clusterBound, g.id+" lists the four engines, ready where blue has them ready", func() bool {
			return f.healthIs(t, g, map[string]string{f.engines[2].URL: "ready", f.engines[3].URL: "ready", f.failing: "not_ready"})
		})
	}
	return f
}

// healthIs reports whether g's GET /workers shows each URL with the health state given.
func (f *blueGreen) healthIs(t *testing.T, g *clusterGW, want map[string]string) bool {
	for u, h := range want {
		w, ok := workerOn(t, g, u)
		if !ok || w.HealthState != h {
			return false
		}
	}
	return true
}

func workerRef(u string) string { return strings.NewReplacer(":", "%3A", "/", "%2F").Replace(u) }

// clientLoops sends chats, plain and streamed, through the green gateways until stop is called,
// which returns how many were sent and which failed.
func clientLoops(t *testing.T, gws []*clusterGW) (stop func() (sent int64, failures []string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var sent atomic.Int64
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second}
	for i, g := range gws {
		for _, stream := range []bool{false, true} {
			wg.Go(func() {
				for n := 0; ctx.Err() == nil; n++ {
					err := oneChat(client, g.URL, stream, fmt.Sprintf("loop %d/%v #%d", i, stream, n))
					sent.Add(1)
					if err != nil {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("%s stream=%v: %v", g.id, stream, err))
						mu.Unlock()
					}
				}
			})
		}
	}
	return func() (int64, []string) {
		cancel()
		wg.Wait()
		return sent.Load(), failures
	}
}

// oneChat sends one chat completion, streamed or not, and checks that it came back whole.
func oneChat(client *http.Client, url string, stream bool, prompt string) error {
	body := fmt.Sprintf(`{"model":"fake-model","stream":%v,"messages":[{"role":"user","content":%q}]}`, stream, prompt)
	resp, err := client.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if !stream {
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			return fmt.Errorf("%d %s %v", resp.StatusCode, b, err)
		}
		return nil
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == "data: [DONE]" {
			return nil
		}
	}
	return fmt.Errorf("the stream ended without [DONE]: %v", sc.Err())
}

// checkHandedOver checks what the rollout promises, on every green gateway: every worker owned
// by a green gateway, the disabled one still disabled, the failing one arrived not_ready at its
// new owner, and the raft leader and every voter green, no blue gateway left in the
// configuration.
func (f *blueGreen) checkHandedOver(t *testing.T) {
	t.Helper()
	green := map[string]bool{}
	for _, g := range f.green {
		green[g.id] = true
	}
	for _, g := range f.green {
		var list struct {
			Workers []adminRecord `json:"workers"`
		}
		if !getJSON(t, g, "/workers", &list) || len(list.Workers) != 4 {
			t.Fatalf("%s: GET /workers: %+v", g.id, list)
		}
		for _, w := range list.Workers {
			if !green[w.Owner] {
				t.Errorf("%s: %s is owned by %s, not a green gateway", g.id, w.URL, w.Owner)
			}
			if (w.URL == f.disabled) != w.Disabled {
				t.Errorf("%s: %s disabled=%v", g.id, w.URL, w.Disabled)
			}
			if w.URL == f.failing && w.HealthState != "not_ready" {
				t.Errorf("%s: the failing engine arrived %s, not not_ready", g.id, w.HealthState)
			}
		}
		var r raftAnswer
		if !getJSON(t, g, "/mesh/raft", &r) || !green[r.Leader] {
			t.Errorf("%s: the leader is %q", g.id, r.Leader)
		}
		for _, s := range r.Servers {
			if !green[s.ID] {
				t.Errorf("%s: %s is still in the raft configuration as a %s", g.id, s.ID, s.Suffrage)
			}
		}
	}
}

// checkWritesAfter stops the blue gateways if they run and checks that a write through green
// still works and is acknowledged by the green gateways, none lagging.
func (f *blueGreen) checkWritesAfter(t *testing.T) {
	t.Helper()
	body := newAdmin(f.green[1].Gateway, "").must(t, 200, "PUT", "/workers/"+workerRef(f.disabled), `{"disabled":false}`)
	var rec struct {
		FleetAck struct {
			Acked, Lagging []string
		} `json:"fleet_ack"`
	}
	if err := json.Unmarshal([]byte(body), &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.FleetAck.Acked) != 3 || len(rec.FleetAck.Lagging) != 0 {
		t.Errorf("a write after blue stopped: fleet_ack %+v", rec.FleetAck)
	}
}

// TestBlueGreenDrain is the rollout of docs/operations.md: blue owns the engines (one disabled,
// one failing), green joins, clients loop through green, `meshctl drain --color blue` hands
// everything to green, blue stops with SIGTERM, and writes still work; no client request is
// lost.
func TestBlueGreenDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	start := time.Now()
	f := startBlueGreen(t)
	t.Logf("blue and green formed in %v", time.Since(start).Round(time.Millisecond))
	stop := clientLoops(t, f.green)

	c := &ctl{bin: f.b.Meshctl, gateway: f.green[0].URL, wait: handoffBound}
	drainAt := time.Now()
	code, stdout, stderr := c.run(t, nil, "drain", "--color", "blue")
	if code != 0 {
		t.Fatalf("meshctl drain --color blue: exit %d\n%s%s", code, stdout, stderr)
	}
	t.Logf("meshctl drain --color blue took %v:\n%s", time.Since(drainAt).Round(time.Millisecond), stdout)
	f.checkHandedOver(t)
	// The runbook's checks, as an operator runs them.
	var owners struct {
		Owners []struct{ Worker, Owner string } `json:"owners"`
	}
	if err := json.Unmarshal([]byte(c.must(t, "owners", "-o", "json")), &owners); err != nil || len(owners.Owners) != 4 {
		t.Fatalf("meshctl owners -o json: %v %+v", err, owners)
	}
	for _, o := range owners.Owners {
		if !strings.HasPrefix(o.Owner, "green") {
			t.Errorf("meshctl owners: %s owned by %s", o.Worker, o.Owner)
		}
	}
	var r raftAnswer
	if err := json.Unmarshal([]byte(c.must(t, "raft", "-o", "json")), &r); err != nil || !strings.HasPrefix(r.Leader, "green") {
		t.Errorf("meshctl raft -o json: %v, leader %q", err, r.Leader)
	}
	for _, g := range f.blue {
		if code := harness.Get(g.URL + "/readiness"); code != http.StatusServiceUnavailable {
			t.Errorf("%s: readiness %d after its drain, want 503", g.id, code)
		}
	}
	for _, g := range f.blue {
		if err := g.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range f.blue {
		if code, err := g.Wait(clusterBound); err != nil || code != 0 {
			t.Fatalf("%s: exit %d, %v", g.id, code, err)
		}
	}
	f.checkWritesAfter(t)
	f.waitMarksCleared(t)
	sent, failures := stop()
	if len(failures) > 0 || sent == 0 {
		t.Fatalf("%d of %d client requests failed: %v", len(failures), sent, failures)
	}
	t.Logf("%d client requests, none lost; total %v", sent, time.Since(start).Round(time.Millisecond))
}

// waitMarksCleared waits until the leader cleared the drain marks of the gateways that are gone,
// as every green gateway sees it.
func (f *blueGreen) waitMarksCleared(t *testing.T) {
	t.Helper()
	for _, g := range f.green {
		harness.WaitFor(t, clusterBound, g.id+" shows no gateway draining", func() bool {
			var d struct {
				Draining []json.RawMessage `json:"draining"`
			}
			return getJSON(t, g, "/mesh/drain", &d) && len(d.Draining) == 0
		})
	}
}

// TestBlueGreenLeaveOnTerminate is the same rollout with --leave-on-terminate: SIGTERM alone
// drains each blue gateway before it stops.
func TestBlueGreenLeaveOnTerminate(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	start := time.Now()
	f := startBlueGreen(t, "--leave-on-terminate", "--drain-timeout-secs", "40")
	stop := clientLoops(t, f.green)
	termAt := time.Now()
	for _, g := range f.blue {
		if err := g.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range f.blue {
		if code, err := g.Wait(handoffBound); err != nil || code != 0 {
			t.Fatalf("%s: exit %d, %v\n%s", g.id, code, err, g.Output())
		}
	}
	t.Logf("the blue gateways drained and stopped %v after SIGTERM", time.Since(termAt).Round(time.Millisecond))
	for _, g := range f.green {
		harness.WaitFor(t, clusterBound, g.id+" sees no blue gateway in the raft configuration", func() bool {
			var r raftAnswer
			if !getJSON(t, g, "/mesh/raft", &r) {
				return false
			}
			for _, s := range r.Servers {
				if strings.HasPrefix(s.ID, "blue") {
					return false
				}
			}
			return true
		})
	}
	f.checkHandedOver(t)
	f.checkWritesAfter(t)
	f.waitMarksCleared(t)
	sent, failures := stop()
	if len(failures) > 0 || sent == 0 {
		t.Fatalf("%d of %d client requests failed: %v", len(failures), sent, failures)
	}
	t.Logf("%d client requests, none lost; total %v", sent, time.Since(start).Round(time.Millisecond))
}

// TestRebalanceAfterJoin: three gateways own twelve workers four each; two more join; `meshctl
// rebalance` moves exactly the minimum, four (the counts become 3 3 2 2 2), and a second
// rebalance moves nothing. `meshctl workers transfer` then moves one worker, seen by every
// gateway.
func TestRebalanceAfterJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	var gws []*clusterGW
	for i := range 5 {
		gws = append(gws, newClusterGW(t, fmt.Sprintf("r%d", i+1)))
	}
	gws[0].start(t, b)
	gws[1].start(t, b, gws[0].meshAddr())
	gws[2].start(t, b, gws[0].meshAddr())
	waitFormed(t, gws[:3]...)
	for i := range 12 {
		u := fmt.Sprintf("http://127.0.0.1:%d", harness.FreePort(t)) // nothing listens: ownership needs no engine
		newAdmin(gws[i%3].Gateway, "").must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, u))
	}
	gws[3].start(t, b, gws[0].meshAddr())
	gws[4].start(t, b, gws[0].meshAddr())
	harness.WaitFor(t, clusterBound, "r1 lists five alive peers", func() bool {
		var p peersAnswer
		alive := 0
		if getJSON(t, gws[0], "/mesh/peers", &p) {
			for _, peer := range p.Peers {
				if peer.Status == "alive" {
					alive++
				}
			}
		}
		return alive == 5
	})

	c := &ctl{bin: b.Meshctl, gateway: gws[4].URL}
	if out := c.must(t, "rebalance", "--dry-run"); !strings.Contains(out, "dry run: 4 moves planned, nothing moved") {
		t.Fatalf("rebalance --dry-run:\n%s", out)
	}
	var ans struct {
		Moved  int            `json:"moved"`
		Owners map[string]int `json:"owners"`
	}
	if err := json.Unmarshal([]byte(c.must(t, "rebalance", "-o", "json")), &ans); err != nil {
		t.Fatal(err)
	}
	counts := []int{ans.Owners["r1"], ans.Owners["r2"], ans.Owners["r3"], ans.Owners["r4"], ans.Owners["r5"]}
	slices.Sort(counts)
	if ans.Moved != 4 || fmt.Sprint(counts) != "[2 2 2 3 3]" || ans.Owners["r4"] != 2 || ans.Owners["r5"] != 2 {
		t.Fatalf("rebalance moved %d (want the minimum, 4), owners %v", ans.Moved, ans.Owners)
	}
	if out := c.must(t, "rebalance"); !strings.Contains(out, "balanced: nothing to move") {
		t.Fatalf("a second rebalance:\n%s", out)
	}
	// Transfer one of r1's workers to r5: every gateway sees the new owner at once.
	var list struct {
		Workers []adminRecord `json:"workers"`
	}
	if !getJSON(t, gws[0], "/workers", &list) {
		t.Fatal("GET /workers")
	}
	var moved adminRecord
	for _, w := range list.Workers {
		if w.Owner == "r1" {
			moved = w
			break
		}
	}
	c.must(t, "workers", "transfer", moved.ID, "--to", "r5")
	for _, g := range gws {
		if w, ok := workerOn(t, g, moved.URL); !ok || w.Owner != "r5" || w.Epoch <= moved.Epoch {
			t.Errorf("%s: after the transfer: %+v", g.id, w)
		}
	}
	if code, _, stderr := c.run(t, nil, "workers", "transfer", moved.ID, "--to", "r9"); code != 1 ||
		!strings.Contains(stderr, "404 peer_not_found: r9 is not a peer of this mesh") {
		t.Errorf("transfer to an unknown peer: exit %d %s", code, stderr)
	}
	// r5 took the requests: it counts the moves by reason, and every gateway the owners.
	text := scrape(t, gws[4].Gateway)
	for _, m := range []struct {
		reason string
		want   float64
	}{{"rebalance", 4}, {"transfer", 1}, {"drain", 0}, {"failover", 0}} {
		if v := mustMetric(t, text, "meshgw_ownership_handoffs_total", "reason", m.reason); v != m.want {
			t.Errorf("meshgw_ownership_handoffs_total{reason=%q} = %v, want %v", m.reason, v, m.want)
		}
	}
	if v := mustMetric(t, scrape(t, gws[0].Gateway), "meshgw_ownership_workers_owned", "peer", "r5"); v != 3 {
		t.Errorf("r1 says r5 owns %v workers, want 3", v)
	}
}

// TestAutoRebalance: with --auto-rebalance, the leader evens out ownership by itself once a
// joined gateway has been alive for the settle time (10 s).
func TestAutoRebalance(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	a1, a2 := newClusterGW(t, "a1", "--auto-rebalance"), newClusterGW(t, "a2", "--auto-rebalance")
	a1.start(t, b)
	for range 6 {
		u := fmt.Sprintf("http://127.0.0.1:%d", harness.FreePort(t))
		newAdmin(a1.Gateway, "").must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, u))
	}
	joined := time.Now()
	a2.start(t, b, a1.meshAddr())
	harness.WaitFor(t, 10*time.Second+clusterBound, "a2 owns three of the six workers", func() bool {
		var owners struct {
			Owners []struct{ Owner string } `json:"owners"`
		}
		n := 0
		if getJSON(t, a2, "/mesh/owners", &owners) {
			for _, o := range owners.Owners {
				if o.Owner == "a2" {
					n++
				}
			}
		}
		return n == 3
	})
	if d := time.Since(joined); d < 10*time.Second {
		t.Errorf("rebalanced %v after a2 joined, before it settled", d)
	}
	t.Logf("rebalanced %v after a2 joined", time.Since(joined).Round(time.Millisecond))
}

// TestPlainSIGTERMKeepsOwnership: without --leave-on-terminate, SIGTERM hands nothing over: a
// gateway restarted within the failover grace comes back as the owner of its worker, at the
// same epoch, and nobody was marked draining.
func TestPlainSIGTERMKeepsOwnership(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	engine := harness.StartEngine(t, b, "engine-keep")
	grace := []string{"--owner-failover-grace-secs", "30"}
	k1, k2, k3 := newClusterGW(t, "k1", grace...), newClusterGW(t, "k2", grace...), newClusterGW(t, "k3", grace...)
	k1.start(t, b)
	k2.start(t, b, k1.meshAddr())
	k3.start(t, b, k1.meshAddr())
	waitFormed(t, k1, k2, k3)
	newAdmin(k2.Gateway, "").must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, engine.URL))
	before, ok := workerOn(t, k1, engine.URL)
	if !ok || before.Owner != "k2" {
		t.Fatalf("before: %+v", before)
	}
	if err := k2.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, err := k2.Wait(clusterBound); err != nil || code != 0 {
		t.Fatalf("k2: exit %d, %v", code, err)
	}
	k2.start(t, b, k1.meshAddr())
	harness.WaitFor(t, clusterBound, "k2 probes its worker again", func() bool {
		w, ok := workerOn(t, k2, engine.URL)
		return ok && w.Origin == "local" && w.LastHealthCheck != nil
	})
	for _, g := range []*clusterGW{k1, k2, k3} {
		w, ok := workerOn(t, g, engine.URL)
		if !ok || w.Owner != "k2" || w.Epoch != before.Epoch {
			t.Errorf("%s: after the restart %+v; want k2 at epoch %d", g.id, w, before.Epoch)
		}
		var d struct {
			Draining []json.RawMessage `json:"draining"`
		}
		if !getJSON(t, g, "/mesh/drain", &d) || len(d.Draining) != 0 {
			t.Errorf("%s: draining %s", g.id, d.Draining)
		}
	}
}
