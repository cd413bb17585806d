package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/meshgw/meshgw/discovery/kube"
	"github.com/meshgw/meshgw/test/fakeengine"
	"github.com/meshgw/meshgw/test/fakekube"
	"github.com/meshgw/meshgw/test/harness"
	"github.com/meshgw/meshgw/test/testkit"
)

// routableBound is the bound from a pod Ready on the API server to routable on every
// gateway.
const routableBound = 2 * time.Second

// seen is one gateway's view of one worker: present, and routable.
type seen struct {
	present, routable bool
	at                time.Time
}

// observer polls GET /workers on the live gateways and keeps, per gateway and URL, the states
// it saw in order (a new entry only when the state changes).
type observer struct {
	mu    sync.Mutex
	seq   map[string]map[string][]seen // gateway id -> URL -> states
	live  map[string]*clusterGW
	stop  chan struct{}
	done  chan struct{}
	polls int
}

func observe(t *testing.T, gws []*clusterGW) *observer {
	o := &observer{seq: map[string]map[string][]seen{}, live: map[string]*clusterGW{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, g := range gws {
		o.live[g.id], o.seq[g.id] = g, map[string][]seen{}
	}
	go func() {
		defer close(o.done)
		tick := time.NewTicker(10 * time.Millisecond) // the sampler's pace
		defer tick.Stop()
		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
			o.mu.Lock()
			live := make([]*clusterGW, 0, len(o.live))
			for _, g := range o.live {
				live = append(live, g)
			}
			o.mu.Unlock()
			for _, g := range live {
				o.poll(t, g)
			}
			select {
			case <-o.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(o.close)
	return o
}

func (o *observer) close() {
	select {
	case <-o.stop:
	default:
		close(o.stop)
	}
	<-o.done
}

// poll reads one gateway's workers; a gateway that does not answer leaves its view as it was.
func (o *observer) poll(t *testing.T, g *clusterGW) {
	var list struct {
		Workers []struct {
			URL      string `json:"url"`
			Routable bool   `json:"routable"`
		} `json:"workers"`
	}
	// Not getJSON: its t.Fatal would end this goroutine (and the observation) when a poll of
	// the gateway being killed is already under way.
	a := newAdmin(g.Gateway, "")
	resp, err := a.client.Get(a.base + "/workers")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&list) != nil {
		return
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.polls++
	m := o.seq[g.id]
	present := map[string]bool{}
	for _, w := range list.Workers {
		present[w.URL] = true
		o.add(m, w.URL, seen{present: true, routable: w.Routable, at: now})
	}
	for u, s := range m {
		if !present[u] && s[len(s)-1].present {
			o.add(m, u, seen{at: now})
		}
	}
}

func (o *observer) add(m map[string][]seen, u string, s seen) {
	prev := m[u]
	if n := len(prev); n > 0 && prev[n-1].present == s.present && prev[n-1].routable == s.routable {
		return
	}
	m[u] = append(prev, s)
}

// forget stops polling a gateway (killed).
func (o *observer) forget(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.live, id)
}

// routableEverywhere is when u was first routable on every live gateway at or after since; ok
// false while it is not yet.
func (o *observer) routableEverywhere(u string, since time.Time) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var latest time.Time
	for id := range o.live {
		s := o.seq[id][u]
		if len(s) == 0 || !s[len(s)-1].routable {
			return time.Time{}, false
		}
		first := s[len(s)-1].at
		for i := len(s) - 1; i >= 0 && s[i].routable; i-- {
			first = s[i].at
		}
		if first.Before(since) {
			first = since
		}
		if first.After(latest) {
			latest = first
		}
	}
	return latest, true
}

// state is u's last state on every live gateway: "routable", "draining" (present, not
// routable), "absent" or "mixed".
func (o *observer) state(u string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := ""
	for id := range o.live {
		st := "absent"
		if s := o.seq[id][u]; len(s) > 0 && s[len(s)-1].present {
			st = "draining"
			if s[len(s)-1].routable {
				st = "routable"
			}
		}
		if out != "" && out != st {
			return "mixed"
		}
		out = st
	}
	return out
}

// leftRoutingFirst checks that u, once removed, left routing on gateway id before its record
// went: the last state seen present was not routable.
func (o *observer) leftRoutingFirst(id, u string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.seq[id][u]
	for i := 1; i < len(s); i++ {
		if !s[i].present && s[i-1].routable {
			return fmt.Errorf("%s: %s went from routable straight to no record (states %v)", id, u, s)
		}
	}
	return nil
}

var discoveryWrite = regexp.MustCompile(`msg="kubernetes discovery" [^\n]*?op=(register|remove) id=(\S+) url=(\S+)`)

// TestDiscoveryFleet: three gateways with discovery on follow 20 pods of the scripted API
// server through scale-up, readiness flaps, a leader killed mid-way and scale-down. Every Ready
// pod is routable on every gateway within 2 s of its Ready (logged: p50 and max); a removed
// pod's worker leaves routing on every gateway before its record goes; no record is written
// twice; the killed leader loses nothing.
func TestDiscoveryFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	start := time.Now()
	api := startFakeKube(t)

	// 20 engines in this process on 127.0.0.1, one per pod; a pod's annotation names its port.
	const pods = 20
	urls := make([]string, pods)
	ports := make([]int, pods)
	for i := range pods {
		e := fakeengine.New(fakeengine.Config{NodeName: fmt.Sprintf("pod-%d", i), Logger: testkit.Quiet()})
		addr, err := e.Start("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		_, p, _ := net.SplitHostPort(strings.TrimPrefix(addr, "http://"))
		ports[i], _ = strconv.Atoi(p)
		urls[i] = "http://127.0.0.1:" + p
	}
	labels := map[string]string{"app": "sglang"}
	pod := func(i int, at time.Time) *corev1.Pod {
		p := fakekube.ReadyPod("llm", fmt.Sprintf("sglang-%d", i), "127.0.0.1", labels, at)
		p.Annotations = map[string]string{kube.AnnotationWorkerPorts: strconv.Itoa(ports[i])}
		return p
	}

	extra := []string{"--service-discovery", "--selector", "app=sglang", "--service-discovery-namespace", "llm",
		"--drain-settle-secs", "1", "--owner-failover-grace-secs", "2", "--health-success-threshold", "1"}
	gws := []*clusterGW{newClusterGW(t, "k1", extra...), newClusterGW(t, "k2", extra...), newClusterGW(t, "k3", extra...)}
	b := harness.Build(t)
	gws[0].start(t, b)
	gws[1].start(t, b, gws[0].meshAddr())
	gws[2].start(t, b, gws[0].meshAddr())
	leader := waitFormed(t, gws...)
	t.Logf("formed in %v, leader %s", time.Since(start).Round(time.Millisecond), leader)
	obs := observe(t, gws)

	// Scale up: 20 pods Ready, one every 50 ms.
	readyAt := make([]time.Time, pods)
	for i := range pods {
		readyAt[i] = time.Now()
		api.Apply(pod(i, readyAt[i]))
		time.Sleep(50 * time.Millisecond) // the scale-up's pace, as a Deployment's rollout spaces pods
	}
	lat := make([]time.Duration, pods)
	for i := range pods {
		harness.WaitFor(t, clusterBound, urls[i]+" routable on every gateway", func() bool {
			at, ok := obs.routableEverywhere(urls[i], readyAt[i])
			lat[i] = at.Sub(readyAt[i])
			return ok
		})
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	t.Logf("pod Ready -> routable on all 3 gateways: p50 %v, max %v (20 pods)", sorted[pods/2].Round(time.Millisecond), sorted[pods-1].Round(time.Millisecond))
	if sorted[pods-1] > routableBound {
		t.Errorf("a pod took %v to be routable on every gateway; the bound is %v", sorted[pods-1], routableBound)
	}

	// Flaps shorter than the grace (5 s): not Ready for 300 ms, then Ready again. Nothing is
	// written for them.
	for i := range 5 {
		now := time.Now()
		api.Apply(fakekube.SetReady(pod(i, readyAt[i]), false, now))
	}
	time.Sleep(300 * time.Millisecond) // the flap's length, shorter than the grace
	for i := range 5 {
		api.Apply(pod(i, time.Now()))
	}

	// Scale down 10 pods, killing the leader half-way.
	var killed *clusterGW
	for _, g := range gws {
		if g.id == leader {
			killed = g
		}
	}
	for i := 10; i < 15; i++ {
		api.Delete("llm", fmt.Sprintf("sglang-%d", i))
	}
	// The leader is killed once it has drained the first half, so the second half is the new
	// leader's, from a fresh list.
	for i := 10; i < 15; i++ {
		harness.WaitFor(t, clusterBound, urls[i]+" out of routing", func() bool { st := obs.state(urls[i]); return st == "draining" || st == "absent" })
	}
	obs.forget(killed.id)
	killed.Kill()
	killedAt := time.Now()
	for i := 15; i < pods; i++ {
		api.Delete("llm", fmt.Sprintf("sglang-%d", i))
	}
	var rest []*clusterGW
	for _, g := range gws {
		if g != killed {
			rest = append(rest, g)
		}
	}
	harness.WaitFor(t, clusterBound, "a new leader", func() bool {
		l := leaderOf(t, rest[0])
		return l != "" && l != killed.id
	})
	for i := range pods {
		want := "routable"
		if i >= 10 {
			want = "absent"
		}
		harness.WaitFor(t, 2*clusterBound, fmt.Sprintf("%s %s on the survivors", urls[i], want), func() bool { return obs.state(urls[i]) == want })
	}
	t.Logf("every pod in place on the survivors %v after the leader was killed", time.Since(killedAt).Round(time.Millisecond))
	obs.close()
	for i := 10; i < pods; i++ {
		for _, g := range rest {
			if err := obs.leftRoutingFirst(g.id, urls[i]); err != nil {
				t.Error(err)
			}
		}
	}

	// No record written twice: every gateway's log, the killed leader's too.
	writes, by := map[string]int{}, map[string]int{}
	for _, g := range gws {
		for _, m := range discoveryWrite.FindAllStringSubmatch(g.Output(), -1) {
			writes[m[1]+" "+m[3]]++
			by[g.id+" "+m[1]]++
		}
	}
	t.Logf("discovery writes by gateway: %v", by)
	if by[killed.id+" remove"] == 0 || by[killed.id+" remove"] == pods-10 {
		t.Errorf("the killed leader wrote %d of the %d removals; the kill was to come half-way", by[killed.id+" remove"], pods-10)
	}
	for w, n := range writes {
		if n > 1 {
			t.Errorf("%s written %d times", w, n)
		}
	}
	for i := range pods {
		if writes["register "+urls[i]] != 1 {
			t.Errorf("%s registered %d times, want once", urls[i], writes["register "+urls[i]])
		}
	}
	t.Logf("%d discovery writes, %d polls; total %v", len(writes), obs.polls, time.Since(start).Round(time.Millisecond))
}
