package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
	"github.com/meshgw/meshgw/test/wan"
)

// Ports inside each region's namespace: every region has its own, so they can be fixed.
const (
	wanHTTP, wanMetrics, wanMesh, wanRaft, wanRPC = 8080, 9090, 7946, 7947, 7948
	wanEngine                                     = 8000
	wanKey                                        = "wan-test-admin-key"
)

// wanFleet is a gateway and two engines in each region of a simulated WAN (test/wan): the
// gateway is host 0 of its region, the engines hosts 1 and 2, registered by their region's
// gateway (so in its region, and owned by it).
type wanFleet struct {
	net     *wan.Net
	regions []string
	gws     []*wanGateway
}

type wanGateway struct {
	id, region string
	proc       *harness.Proc
	admin      *adminClient
	client     *http.Client // a client in the gateway's region
	base       string
	metrics    string
	engines    []string // URLs
}

// startWANFleet makes the WAN (regions, one-way delay) and starts the fleet on it, the first
// region's gateway first and the others joining it; it skips the test where network
// namespaces cannot be made.
func startWANFleet(t *testing.T, regions []string, delay time.Duration, extra ...string) *wanFleet {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process test")
	}
	if ok, why := wan.Usable(); !ok {
		t.Skip("no simulated WAN here: " + why)
	}
	b := harness.Build(t)
	n, err := wan.New(wan.Config{Prefix: "mgw" + strconv.Itoa(os.Getpid()), Regions: regions, Hosts: 4, Delay: delay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	f := &wanFleet{net: n, regions: regions}
	for r, region := range regions {
		g := &wanGateway{id: "gw-" + region, region: region}
		host := n.Addr(r, 0)
		g.base = "http://" + host + ":" + strconv.Itoa(wanHTTP)
		g.metrics = "http://" + host + ":" + strconv.Itoa(wanMetrics) + "/metrics"
		g.client = &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DialContext: n.DialContext(r)}}
		g.admin = &adminClient{base: g.base, key: wanKey, client: g.client}
		for e := 1; e <= 2; e++ {
			name := fmt.Sprintf("engine-%s-%d", region, e)
			harness.Start(t, name, "ip", []string{"netns", "exec", n.Namespace(r), b.Fakeworker,
				"--host", n.Addr(r, e), "--port", strconv.Itoa(wanEngine), "--node-name", name}, nil, nil)
			g.engines = append(g.engines, "http://"+n.Addr(r, e)+":"+strconv.Itoa(wanEngine))
		}
		args := []string{"netns", "exec", n.Namespace(r), b.Meshgw,
			"--node-id", g.id, "--region", region, "--host", host, "--port", strconv.Itoa(wanHTTP),
			"--prometheus-host", host, "--prometheus-port", strconv.Itoa(wanMetrics),
			"--mesh-port", strconv.Itoa(wanMesh), "--raft-port", strconv.Itoa(wanRaft), "--rpc-port", strconv.Itoa(wanRPC),
			"--mesh-advertise-host", host, "--mesh-profile", "wan", "--state-dir", t.TempDir(),
			"--admin-api-key", wanKey, "--insecure", "--shutdown-settle-secs", "0", "--health-check-interval-secs", "1",
			"--worker-urls", strings.Join(g.engines, ",")}
		if r > 0 {
			args = append(args, "--join", n.Addr(0, 0)+":"+strconv.Itoa(wanMesh))
		}
		g.proc = harness.Start(t, g.id, "ip", append(args, extra...), nil, nil)
		f.gws = append(f.gws, g)
	}
	return f
}

// chatRegion sends a chat through the gateway from its region and returns the region of the
// worker that served it (X-Mesh-Worker-Region).
func (g *wanGateway) chatRegion(t *testing.T) string {
	t.Helper()
	body := `{"model":"fake-model","messages":[{"role":"user","content":"hello across the WAN"}]}`
	resp, err := g.client.Post(g.base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("a chat through %s: %v", g.id, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("a chat through %s answered %d: %.200s", g.id, resp.StatusCode, b)
	}
	return resp.Header.Get("X-Mesh-Worker-Region")
}

// get answers the status and body of a GET from the gateway's region, 0 when it fails.
func (g *wanGateway) get(u string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+wanKey)
	resp, err := g.client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitFormed waits until every gateway sees every other alive, one leader, every gateway in
// the raft configuration, and its own two engines routable everywhere; it returns the leader.
func (f *wanFleet) waitFormed(t *testing.T) string {
	t.Helper()
	var leader string
	harness.WaitFor(t, 90*time.Second, "the WAN fleet to form: every peer alive, one leader, every engine routable", func() bool {
		leader = ""
		for _, g := range f.gws {
			if g.proc.Exited() {
				t.Fatalf("%s exited:\n%s", g.id, g.proc.Output())
			}
			var p peersAnswer
			var r raftAnswer
			var w struct {
				Workers []struct {
					URL      string `json:"url"`
					Routable bool   `json:"routable"`
				} `json:"workers"`
			}
			for path, v := range map[string]any{"/mesh/peers": &p, "/mesh/raft": &r, "/workers": &w} {
				code, body := g.get(g.base + path)
				if code != 200 || json.Unmarshal([]byte(body), v) != nil {
					return false
				}
			}
			alive, routable := 0, 0
			for _, peer := range p.Peers {
				if peer.Status == "alive" {
					alive++
				}
			}
			for _, w := range w.Workers {
				if w.Routable {
					routable++
				}
			}
			if alive != len(f.gws) || len(r.Servers) != len(f.gws) || r.Leader == "" || (leader != "" && r.Leader != leader) ||
				routable != 2*len(f.gws) {
				return false
			}
			leader = r.Leader
		}
		return true
	})
	return leader
}

// terms reads meshgw_raft_term from each gateway.
func (f *wanFleet) terms(t *testing.T) []float64 {
	t.Helper()
	out := make([]float64, len(f.gws))
	for i, g := range f.gws {
		code, body := g.get(g.metrics)
		if code != 200 {
			t.Fatalf("%s /metrics: %d", g.id, code)
		}
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, "meshgw_raft_term "); ok {
				out[i], _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		}
		if out[i] == 0 {
			t.Fatalf("%s: no meshgw_raft_term on /metrics", g.id)
		}
	}
	return out
}

// Over links of 25 ms one way between three regions, with --mesh-profile wan (and so raft's
// timings times 3): the fleet forms; chats through each region's gateway stay in its region
// (locality routing), and leave it, reporting their outcomes to the owners across the WAN,
// when the region's engines are disabled; a
// fleet-acknowledged disable sent to a region that does not hold the leader (so forwarded
// across the WAN) is applied on every gateway when it answers; and no election happens after
// the fleet formed.
func TestWANFleetOverDelayedLinks(t *testing.T) {
	const delay = 25 * time.Millisecond
	f := startWANFleet(t, []string{"eu", "us", "ap"}, delay, "--policy", "round_robin")
	start := time.Now()
	leader := f.waitFormed(t)
	t.Logf("formed in %s; leader %s", time.Since(start).Round(time.Millisecond), leader)
	terms := f.terms(t)

	// Locality routing (on: every gateway has a region): with its own engines routable, no
	// request leaves a gateway's region.
	const chats = 30
	for _, g := range f.gws {
		for range chats {
			if got := g.chatRegion(t); got != g.region {
				t.Fatalf("a chat through %s was served in region %q with its own engines routable", g.id, got)
			}
		}
	}
	// Both of eu's engines disabled: eu's requests all go to the other regions, and their
	// outcome reports cross the WAN to the owners, on streams that do not wait for a round trip
	// per report.
	eu := f.gws[0]
	for _, e := range eu.engines {
		eu.admin.must(t, 200, "PUT", "/workers/"+url.PathEscape(e), `{"disabled":true,"reason":"locality test"}`)
	}
	crossed := map[string]int{}
	for range chats {
		crossed[eu.chatRegion(t)]++
	}
	if crossed[eu.region] != 0 || crossed["us"]+crossed["ap"] != chats {
		t.Fatalf("with eu's engines disabled, eu's %d chats were served in %v; want all in us and ap", chats, crossed)
	}
	var received float64
	harness.WaitFor(t, 10*time.Second, "the owners to receive the outcome reports of the cross-region requests", func() bool {
		received = 0
		for _, g := range f.gws {
			_, body := g.get(g.metrics)
			v, _ := metricValue(body, "meshgw_mesh_outcome_reports_total", "result", "received")
			received += v
		}
		return received >= chats
	})
	for _, g := range f.gws {
		_, body := g.get(g.metrics)
		if v, _ := metricValue(body, "meshgw_mesh_outcome_reports_total", "result", "dropped"); v != 0 {
			t.Errorf("%s dropped %v outcome reports over the WAN", g.id, v)
		}
	}
	t.Logf("eu's engines disabled: %d chats served in %v; outcome reports received by the owners: %v", chats, crossed, received)
	for _, e := range eu.engines {
		eu.admin.must(t, 200, "PUT", "/workers/"+url.PathEscape(e), `{"disabled":false}`)
	}

	// The writer: a gateway that does not lead, so each write is forwarded over the WAN.
	w := f.gws[slices.IndexFunc(f.gws, func(g *wanGateway) bool { return g.id != leader })]
	target := f.gws[0].engines[0]
	path := "/workers/" + url.PathEscape(target)
	const rounds = 10
	var took []time.Duration
	for i := range rounds {
		for _, disabled := range []bool{true, false} {
			t0 := time.Now()
			req := `{"disabled":false}`
			if disabled {
				req = `{"disabled":true,"reason":"wan test"}`
			}
			code, body := w.admin.do(t, "PUT", path, req)
			took = append(took, time.Since(t0))
			var rec workerAnswer
			if code != 200 || json.Unmarshal([]byte(body), &rec) != nil || rec.FleetAck == nil ||
				len(rec.FleetAck.Acked) != len(f.gws) || len(rec.FleetAck.Lagging) != 0 {
				t.Fatalf("round %d: disabled=%t through %s answered %d: %.300s", i, disabled, w.id, code, body)
			}
			// What the answer promises holds on every gateway the moment it is sent: a local
			// read (no barrier) everywhere shows the flag.
			for _, g := range f.gws {
				code, body := g.get(g.base + path + "?consistent=false")
				if code != 200 || json.Unmarshal([]byte(body), &rec) != nil || rec.Disabled != disabled {
					t.Fatalf("round %d: right after the write's answer %s reads %d %.200s; want disabled=%t", i, g.id, code, body, disabled)
				}
			}
		}
	}
	slices.Sort(took)
	t.Logf("fleet-acknowledged flag writes forwarded from %s over %s one-way links: p50 %s, max %s (%d writes; a round trip is %s)",
		w.id, delay, took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), len(took), 2*delay)
	if after := f.terms(t); !slices.Equal(after, terms) {
		t.Errorf("raft terms moved from %v to %v: an election over links of %s one way", terms, after, delay)
	}
}

// A region cut off from the others: its writes fail within a second of the cut with 503
// no_leader saying it cannot reach a quorum (a write handed to the leader just before the
// gateway could know answers outcome_unknown, also within the second), its gateway says it has
// no quorum, the other regions keep writing, and after the heal everything converges.
func TestWANRegionCutOff(t *testing.T) {
	const delay = 25 * time.Millisecond
	f := startWANFleet(t, []string{"eu", "us", "ap"}, delay, "--policy", "round_robin", "--readiness-requires-quorum")
	leader := f.waitFormed(t)
	cut := f.gws[slices.IndexFunc(f.gws, func(g *wanGateway) bool { return g.id != leader })]
	if code, body := cut.get(cut.base + "/readiness"); code != 200 {
		t.Fatalf("%s's /readiness before the cut: %d %.200s", cut.id, code, body)
	}
	other := f.gws[slices.IndexFunc(f.gws, func(g *wanGateway) bool { return g != cut })]
	target := other.engines[0]
	path := "/workers/" + url.PathEscape(target)
	r := f.net.Region(cut.region)
	f.net.Cut(r)
	cutAt := time.Now()
	t.Logf("cut off region %s (%s); the leader is %s", cut.region, cut.id, leader)
	firstNoQuorum := writesFailWithinASecond(t, cut, path, cutAt)
	t.Logf("the first write to answer no quorum through %s did %s after the cut", cut.id, firstNoQuorum.Round(time.Millisecond))

	// The gateway finds out from the silence of its leader (half raft's heartbeat timeout,
	// 1.5 s with --mesh-profile wan): GET /status says quorum false.
	harness.WaitFor(t, 10*time.Second, cut.id+"'s /status to say it has no quorum", func() bool {
		var st struct {
			Quorum *bool `json:"quorum"`
		}
		code, body := cut.get(cut.base + "/status")
		return code == 200 && json.Unmarshal([]byte(body), &st) == nil && st.Quorum != nil && !*st.Quorum
	})
	t.Logf("%s's /status said quorum false %s after the cut", cut.id, time.Since(cutAt).Round(time.Millisecond))
	// GET /mesh/peers (meshctl peers) marks the answering gateway cut off, with its silence.
	type peerRow struct {
		Self    bool    `json:"self"`
		CutOff  bool    `json:"cut_off"`
		Silence float64 `json:"leader_silence_secs"`
	}
	var peers struct {
		Peers []peerRow `json:"peers"`
	}
	if code, body := cut.get(cut.base + "/mesh/peers"); code != 200 || json.Unmarshal([]byte(body), &peers) != nil {
		t.Fatalf("GET /mesh/peers of the cut-off %s answered %d: %.300s", cut.id, code, body)
	}
	if i := slices.IndexFunc(peers.Peers, func(p peerRow) bool { return p.Self }); i < 0 || !peers.Peers[i].CutOff || peers.Peers[i].Silence <= 0 {
		t.Fatalf("GET /mesh/peers of the cut-off %s does not mark itself cut off: %+v", cut.id, peers.Peers)
	}
	// /readiness is rendered at each change of the pool and every second besides.
	harness.WaitFor(t, 3*time.Second, cut.id+"'s /readiness (--readiness-requires-quorum) to answer 503 no quorum", func() bool {
		code, body := cut.get(cut.base + "/readiness")
		return code == 503 && strings.Contains(body, "no quorum")
	})

	// Fail-static: the cut-off gateway serves every request its own engines can, in its region.
	for i := range 20 {
		if got := cut.chatRegion(t); got != cut.region {
			t.Fatalf("chat %d through the cut-off %s was served in region %q", i, cut.id, got)
		}
	}

	var slow []time.Duration
	for i := range 8 {
		t0 := time.Now()
		code, body := cut.admin.do(t, "PUT", path, `{"disabled":true,"reason":"from the cut region"}`)
		d := time.Since(t0)
		t.Logf("write %d through the cut region: %d in %s: %.160s", i, code, d.Round(time.Millisecond), body)
		if code != 503 || errorCode(body) != "no_leader" || !strings.Contains(body, "cannot reach a quorum") {
			t.Fatalf("a write through a cut-off region answered %d: %.300s; want 503 no_leader saying it cannot reach a quorum", code, body)
		}
		if d > time.Second {
			slow = append(slow, d)
		}
	}
	if len(slow) > 0 {
		t.Errorf("writes through the cut region took %v; want each within 1 s", slow)
	}

	// The other regions keep writing: the quorum is theirs. The answer names the cut gateway
	// as lagging once the fleet acknowledgement gives it up.
	t0 := time.Now()
	code, body := other.admin.do(t, "PUT", path, `{"disabled":true,"reason":"while a region is cut off"}`)
	t.Logf("a write through %s while %s is cut off: %d in %s: %.300s", other.id, cut.id, code, time.Since(t0).Round(time.Millisecond), body)
	if code != 200 {
		t.Fatalf("a write through %s (with the quorum) while %s is cut off answered %d: %.300s", other.id, cut.id, code, body)
	}

	f.net.Heal(r)
	healed := time.Now()
	harness.WaitFor(t, 10*time.Second, cut.id+" to apply the write made while it was cut off", func() bool {
		var rec workerAnswer
		code, body := cut.get(cut.base + path + "?consistent=false")
		return code == 200 && json.Unmarshal([]byte(body), &rec) == nil && rec.Disabled
	})
	t.Logf("%s converged %s after the heal", cut.id, time.Since(healed).Round(time.Millisecond))
	code, body = cut.admin.do(t, "PUT", path, `{"disabled":false}`)
	if code != 200 {
		t.Fatalf("a write through %s after the heal answered %d: %.300s", cut.id, code, body)
	}

	// The leader's own region cut off: raft keeps it leading for its lease (1.5-3 s over the
	// WAN), yet its writes fail within the second all the same; the fleet forms again after
	// the heal.
	leader = f.waitFormed(t)
	lg := f.gws[slices.IndexFunc(f.gws, func(g *wanGateway) bool { return g.id == leader })]
	lr := f.net.Region(lg.region)
	f.net.Cut(lr)
	at := writesFailWithinASecond(t, lg, path, time.Now())
	t.Logf("the first write to answer no quorum through the cut-off leader %s did %s after the cut", lg.id, at.Round(time.Millisecond))
	f.net.Heal(lr)
	f.waitFormed(t)
}

// writesFailWithinASecond writes through g, one write after another, from just after its
// region was cut off at cutAt until one answers no quorum, and returns when that one did. Each
// must answer within a second of being sent, with 503 no_leader saying the gateway cannot reach
// a quorum, or, before the first such answer (sent before the gateway could know), 503
// outcome_unknown; and the first no-quorum answer must come within a second of the cut.
func writesFailWithinASecond(t *testing.T, g *wanGateway, path string, cutAt time.Time) time.Duration {
	t.Helper()
	for i := 0; time.Since(cutAt) < 5*time.Second; i++ {
		t0 := time.Now()
		code, body := g.admin.do(t, "PUT", path, `{"disabled":true,"reason":"from the cut region"}`)
		took, at := time.Since(t0), time.Since(cutAt)
		t.Logf("write %d through the cut-off %s, sent %s after the cut: %d in %s: %.200s", i, g.id,
			t0.Sub(cutAt).Round(time.Millisecond), code, took.Round(time.Millisecond), body)
		if took > time.Second {
			t.Errorf("a write through the cut-off %s took %s; want each within 1 s", g.id, took.Round(time.Millisecond))
		}
		switch {
		case code == 503 && errorCode(body) == "no_leader" && strings.Contains(body, "cannot reach a quorum"):
			if at > time.Second {
				t.Errorf("the first write through the cut-off %s to answer no quorum did %s after the cut; want within 1 s", g.id, at.Round(time.Millisecond))
			}
			return at
		case code == 503 && errorCode(body) == "outcome_unknown":
		default:
			t.Fatalf("a write through the cut-off %s answered %d: %.300s; want 503 no_leader saying it cannot reach a quorum", g.id, code, body)
		}
	}
	t.Fatalf("no write through the cut-off %s answered no quorum within 5 s of the cut", g.id)
	return 0
}
