package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/meshgw/meshgw/test/proc"
	"github.com/meshgw/meshgw/test/wan"
)

// WANOptions configure the wan section: three regions of a simulated WAN (test/wan), a gateway
// and two fake engines in each. Zero fields take the defaults in their comments.
type WANOptions struct {
	FakeworkerBin string // "bin/fakeworker"
	// Delay is the one-way delay of every link between two regions (50 ms).
	Delay time.Duration
	// Requests is the number of chats of the healthy run, spread over the three gateways
	// (1,000), and SpillRequests that of each run with local workers disabled (1,000).
	Requests, SpillRequests int
	// InFlight is the chats in flight in the runs with local workers disabled (8).
	InFlight int
	// Writes is the fleet-acknowledged disables timed through each of two gateways in each of
	// two halves, quiet and under load, each followed by an enable, also timed (50).
	Writes int
	// Trials is the health flips of the bulletin run and the prompts of the cache index run
	// (10).
	Trials int
	// NoFailover leaves out the failover run, which waits about 50 s for memberlist's WAN
	// timings to declare the killed gateway dead.
	NoFailover bool
	// Timeout bounds the whole section (10 min).
	Timeout time.Duration
}

func (w *WANOptions) setDefaults() {
	if w.FakeworkerBin == "" {
		w.FakeworkerBin = "bin/fakeworker"
	}
	if w.Delay <= 0 {
		w.Delay = 50 * time.Millisecond
	}
	w.Requests = cmp0(w.Requests, 1000)
	w.SpillRequests = cmp0(w.SpillRequests, 1000)
	w.InFlight = cmp0(w.InFlight, 8)
	w.Writes = cmp0(w.Writes, 50)
	w.Trials = cmp0(w.Trials, 10)
	if w.Timeout <= 0 {
		w.Timeout = 10 * time.Minute
	}
}

// The fleet of the wan section: ports inside each region's namespace (each has its own, so they
// are fixed), the regions, and the model only the pinned engine serves.
const (
	wanHTTP, wanMetrics, wanMesh, wanRaft, wanRPC = 8080, 9090, 7946, 7947, 7948
	wanEnginePort                                 = 8000
	wanModel                                      = "fake-model"
	wanPinnedModel                                = "wan-pinned"
	wanFormWithin                                 = 120 * time.Second
)

var wanRegions = []string{"eu", "us", "ap"}

// wanFleet is the running fleet: a gateway (host 0) and two engines (hosts 1 and 2) in each
// region, each engine registered through its region's gateway (so owned by it, in its region)
// with its model declared; later a pinned engine (host 3) in one region, serving a model no
// other engine serves. A worker that declares no model serves any, so every one declares its.
type wanFleet struct {
	net     *wan.Net
	ps      *procs
	w       *WANOptions
	key     string // the admin key, random per run; never logged
	gws     []*wanGW
	started []*proc.Proc
	engines map[string]*wanEngine // by URL
}

// wanEngine is one fake engine: where it runs, what it serves, and its process.
type wanEngine struct {
	r, h        int
	name, model string
	p           *proc.Proc
}

// wanGW is one region's gateway, with a client that dials from its region.
type wanGW struct {
	id, region string
	r          int
	p          *proc.Proc
	base       string
	metrics    string
	engines    []string // URLs of its region's engines
	client     *http.Client
}

// startWANFleet makes the WAN and starts the engines and gateways; the first region's gateway
// bootstraps and the others join it. The caller closes the fleet, also on error.
func startWANFleet(ps *procs, o *Options, w *WANOptions) (*wanFleet, error) {
	key := make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	n, err := wan.New(wan.Config{Prefix: "mgwb" + strconv.Itoa(os.Getpid()), Regions: wanRegions, Hosts: 4, Delay: w.Delay})
	if err != nil {
		return nil, err
	}
	f := &wanFleet{net: n, ps: ps, w: w, key: hex.EncodeToString(key), engines: map[string]*wanEngine{}}
	for r, region := range wanRegions {
		g := &wanGW{id: "gw-" + region, region: region, r: r}
		host := n.Addr(r, 0)
		g.base = "http://" + host + ":" + strconv.Itoa(wanHTTP)
		g.metrics = "http://" + host + ":" + strconv.Itoa(wanMetrics) + "/metrics"
		g.client = &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DialContext: n.DialContext(r), MaxIdleConnsPerHost: 32}}
		for e := 1; e <= 2; e++ {
			u, err := f.startEngine(&wanEngine{r: r, h: e, name: fmt.Sprintf("wan-engine-%s-%d", region, e), model: wanModel})
			if err != nil {
				return f, err
			}
			g.engines = append(g.engines, u)
		}
		dir, err := tempStateDir(o, "wan-"+g.id)
		if err != nil {
			return f, err
		}
		args := []string{"--node-id", g.id, "--region", region, "--host", host, "--port", strconv.Itoa(wanHTTP),
			"--prometheus-host", host, "--prometheus-port", strconv.Itoa(wanMetrics),
			"--mesh-port", strconv.Itoa(wanMesh), "--raft-port", strconv.Itoa(wanRaft), "--rpc-port", strconv.Itoa(wanRPC),
			"--mesh-advertise-host", host, "--mesh-profile", "wan", "--state-dir", dir, "--insecure",
			"--shutdown-settle-secs", "0", "--log-level", "warn", "--health-check-interval-secs", "1",
			"--health-failure-threshold", "1", "--health-success-threshold", "1", "--policy", "cache_aware"}
		if r > 0 {
			args = append(args, "--join", n.Addr(0, 0)+":"+strconv.Itoa(wanMesh))
		}
		// The key goes in the environment, not on the command line that ps shows.
		p, err := ps.startSpec(proc.Spec{Name: "wan-" + g.id, Path: o.MeshgwBin, Args: args, Wrap: []string{"ip", "netns", "exec", n.Namespace(r)},
			Env: []string{"MESHGW_ADMIN_API_KEY=" + f.key}})
		if err != nil {
			return f, err
		}
		g.p = p
		f.started = append(f.started, p)
		f.gws = append(f.gws, g)
	}
	return f, nil
}

// startEngine starts e (again, after killEngine) and returns its URL once it listens.
func (f *wanFleet) startEngine(e *wanEngine) (string, error) {
	l := proc.NewListening(1)
	u := "http://" + f.net.Addr(e.r, e.h) + ":" + strconv.Itoa(wanEnginePort)
	p, err := f.ps.startSpec(proc.Spec{Name: e.name, Path: f.w.FakeworkerBin, Wrap: []string{"ip", "netns", "exec", f.net.Namespace(e.r)},
		Args: []string{"--host", f.net.Addr(e.r, e.h), "--port", strconv.Itoa(wanEnginePort), "--node-name", e.name, "--model", e.model,
			"--log-level", "warn"}, OnLine: l.Line})
	if err != nil {
		return "", err
	}
	e.p = p
	f.engines[u] = e
	f.started = append(f.started, p)
	if _, err := l.Wait(context.Background(), p, 10*time.Second); err != nil {
		return "", fmt.Errorf("%s: %w (see %s)", e.name, err, filepath.Join(f.ps.dir, e.name+".log"))
	}
	return u, nil
}

// killEngine kills the engine at u (kill -9).
func (f *wanFleet) killEngine(u string) {
	if e := f.engines[u]; e != nil && e.p != nil {
		e.p.Kill()
	}
}

// register registers the engine at u through g with its model declared: g owns it, and it is in
// g's region.
func (f *wanFleet) register(ctx context.Context, g *wanGW, u string) error {
	body, _ := json.Marshal(map[string]any{"url": u, "models": []string{f.engines[u].model}})
	_, err := f.admin(ctx, g, http.MethodPost, "/workers", string(body), nil)
	return err
}

// routableEverywhere waits until every gateway shows the worker at u routable (want) or not.
func (f *wanFleet) routableEverywhere(ctx context.Context, u string, want bool, within time.Duration) error {
	return proc.Until(ctx, within, 20*time.Millisecond, fmt.Sprintf("every gateway to show %s routable=%t", u, want), func() bool {
		for _, g := range f.gws {
			if r, err := f.worker(ctx, g, u); err != nil || r.Routable != want {
				return false
			}
		}
		return true
	})
}

// close stops every process of the fleet and removes the namespaces.
func (f *wanFleet) close() {
	proc.StopAll(5*time.Second, f.started...)
	f.net.Close()
}

// exited says which gateway exited, or is nil.
func (f *wanFleet) exited() error {
	for _, g := range f.gws {
		if g.p.Exited() {
			return fmt.Errorf("%s exited: %v (see %s)", g.id, g.p.Err(), filepath.Join(f.ps.dir, "wan-"+g.id+".log"))
		}
	}
	return nil
}

// admin sends an admin request with the key from the gateway's region and decodes a 2xx answer
// into v (nil: discarded); it returns the status (0 when no answer came).
func (f *wanFleet) admin(ctx context.Context, g *wanGW, method, path, body string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, g.base+path, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+f.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%s %s on %s: %s %.300s", method, path, g.id, resp.Status, bytes.TrimSpace(data))
	}
	if v != nil {
		return resp.StatusCode, json.Unmarshal(data, v)
	}
	return resp.StatusCode, nil
}

// chat posts one chat for model with the given text through g from its region and returns the
// status and the region of the worker that served it (X-Mesh-Worker-Region).
func (g *wanGW) chat(ctx context.Context, model, text string) (int, string, error) {
	return postChat(ctx, g.client, g.base, model, text)
}

// postChat posts one chat to base and returns the status and X-Mesh-Worker-Region.
func postChat(ctx context.Context, c *http.Client, base, model, text string) (int, string, error) {
	body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 16,
		"messages": []map[string]string{{"role": "user", "content": text}}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+chatPath, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header.Get("X-Mesh-Worker-Region"), nil
}

// wanWorker is the part of an admin worker record the section reads.
type wanWorker struct {
	ID          string `json:"id"`
	URL         string `json:"url"`
	Owner       string `json:"owner"`
	Epoch       uint64 `json:"epoch"`
	HealthState string `json:"health_state"`
	Disabled    bool   `json:"disabled"`
	Routable    bool   `json:"routable"`
	FleetAck    *struct {
		Acked   []string `json:"acked"`
		Lagging []string `json:"lagging"`
	} `json:"fleet_ack"`
}

// workers is g's GET /workers, read locally (no raft barrier).
func (f *wanFleet) workers(ctx context.Context, g *wanGW) ([]wanWorker, error) {
	var list struct {
		Workers []wanWorker `json:"workers"`
	}
	_, err := f.admin(ctx, g, http.MethodGet, "/workers?consistent=false", "", &list)
	return list.Workers, err
}

// worker is g's record of the worker at URL u, read locally.
func (f *wanFleet) worker(ctx context.Context, g *wanGW, u string) (wanWorker, error) {
	var w wanWorker
	_, err := f.admin(ctx, g, http.MethodGet, workerPath(u)+"?consistent=false", "", &w)
	return w, err
}

func workerPath(u string) string { return "/workers/" + url.PathEscape(u) }

// waitFormed waits until every gateway sees the others alive, one leader, three voters, and
// want workers routable; it returns the leader's node id.
func (f *wanFleet) waitFormed(ctx context.Context, want int, within time.Duration) (string, error) {
	var leader string
	var last string
	err := proc.Until(ctx, within, 100*time.Millisecond, "the WAN fleet to form", func() bool {
		if f.exited() != nil {
			return true
		}
		leader = ""
		for _, g := range f.gws {
			var peers struct {
				Peers []struct{ Status string } `json:"peers"`
			}
			var raft struct {
				Leader  string     `json:"leader"`
				Servers []struct{} `json:"servers"`
			}
			if _, err := f.admin(ctx, g, http.MethodGet, "/mesh/peers", "", &peers); err != nil {
				last = err.Error()
				return false
			}
			if _, err := f.admin(ctx, g, http.MethodGet, "/mesh/raft", "", &raft); err != nil {
				last = err.Error()
				return false
			}
			ws, err := f.workers(ctx, g)
			if err != nil {
				last = err.Error()
				return false
			}
			alive, routable := 0, 0
			for _, p := range peers.Peers {
				if p.Status == "alive" {
					alive++
				}
			}
			for _, w := range ws {
				if w.Routable {
					routable++
				}
			}
			last = fmt.Sprintf("%s: %d alive, %d servers, leader %q, %d of %d workers routable", g.id, alive, len(raft.Servers), raft.Leader, routable, want)
			if alive != len(f.gws) || len(raft.Servers) != len(f.gws) || raft.Leader == "" || (leader != "" && raft.Leader != leader) || routable != want {
				return false
			}
			leader = raft.Leader
		}
		return true
	})
	if e := f.exited(); e != nil {
		return "", e
	}
	if err != nil {
		return "", fmt.Errorf("%w (last: %s)", err, last)
	}
	return leader, nil
}

// gw is the gateway of node id, or nil.
func (f *wanFleet) gw(id string) *wanGW {
	for _, g := range f.gws {
		if g.id == id {
			return g
		}
	}
	return nil
}

// errNoLeader is a fleet whose leader is none of its gateways.
var errNoLeader = errors.New("the raft leader is none of the three gateways")
