package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/meshgw/meshgw/test/proc"
)

// ControlOptions configure the control-plane sections: raft write latency and the memory and
// start time of a gateway holding many worker records.
type ControlOptions struct {
	RaftbenchBin string // default "bin/bench-raftbench"
	// AdminWrites is the number of sequential admin writes (PUT /workers/{id} disabling and
	// enabling one worker) timed through one meshgw on its own state directory; default 1,000.
	AdminWrites int
	// ClusterNodes and ClusterWrites shape `raftbench cluster`: voters on loopback TCP with bbolt
	// stores, and sequential writes through the leader; defaults 3 and 2,000.
	ClusterNodes, ClusterWrites int
	// Workers is the number of imported worker records the memory section restores; default
	// 100,000.
	Workers int
	// Starts is how many times meshgw is started on those records (the start time is their
	// median); default 3.
	Starts int
	// Registrations is how many sequential registrations are timed with 1,000 records and with
	// Workers records; default 300.
	Registrations int
	// NoRaft skips the raft section; NoRecords the memory section's part with many worker
	// records.
	NoRaft, NoRecords bool
	// Uploads bodies of UploadMiB MiB each are posted at once through a fresh meshgw for each
	// --max-buffered-body-mb in UploadBudgetsMiB (0: meshgw's default); defaults 20, 100 and
	// [0]. Uploads below 0 skips the part.
	Uploads, UploadMiB int
	UploadBudgetsMiB   []int
}

func (c *ControlOptions) setDefaults() {
	if c.RaftbenchBin == "" {
		c.RaftbenchBin = "bin/bench-raftbench"
	}
	c.AdminWrites = cmp0(c.AdminWrites, 1_000)
	c.ClusterNodes = cmp0(c.ClusterNodes, 3)
	c.ClusterWrites = cmp0(c.ClusterWrites, 2_000)
	c.Workers = cmp0(c.Workers, 100_000)
	c.Starts = cmp0(c.Starts, 3)
	c.Registrations = cmp0(c.Registrations, 300)
	c.Uploads = cmp0(c.Uploads, 20)
	c.UploadMiB = cmp0(c.UploadMiB, 100)
	if len(c.UploadBudgetsMiB) == 0 {
		c.UploadBudgetsMiB = []int{0}
	}
}

// controlGateway is one meshgw started by a control-plane section, with its ports.
type controlGateway struct {
	p       *proc.Proc
	log     string // its stderr
	base    string // http://127.0.0.1:PORT
	metrics string // http://127.0.0.1:MPORT (pprof is on)
	started time.Time
}

// startControlGateway starts meshgw on stateDir as node "bench", with raft on a free port, its
// metrics listener and pprof on, and no workers on its command line.
func startControlGateway(ps *procs, o *Options, name, stateDir string) (*controlGateway, error) {
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	args := []string{"--host", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--node-id", "bench",
		"--state-dir", stateDir, "--raft-port", strconv.Itoa(ports[1]), "--log-level", "warn",
		"--prometheus-port", strconv.Itoa(ports[2]), "--prometheus-host", "127.0.0.1", "--enable-pprof",
		// A mesh of one: its mesh and gRPC ports are not measured. The records' owner is no
		// member, so failover would move them here after its grace: keep them imported.
		"--mesh-port", "0", "--rpc-port", "0", "--owner-failover-grace-secs", "86400"}
	t0 := time.Now()
	p, err := ps.start(name, nil, o.MeshgwBin, args...)
	if err != nil {
		return nil, err
	}
	return &controlGateway{p: p, started: t0, log: filepath.Join(ps.dir, name+".log"),
		base:    "http://127.0.0.1:" + strconv.Itoa(ports[0]),
		metrics: "http://127.0.0.1:" + strconv.Itoa(ports[2])}, nil
}

// gatewayStatus is the part of GET /status the sections read.
type gatewayStatus struct {
	Workers struct {
		Total int `json:"total"`
	} `json:"workers"`
	Raft *struct {
		Leader string `json:"leader"`
	} `json:"raft"`
}

// waitStatus polls GET /status every 5 ms until ok accepts it, and returns the time since the
// gateway's process was started.
func (g *controlGateway) waitStatus(ctx context.Context, within time.Duration, ok func(gatewayStatus) bool) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		var st gatewayStatus
		if err := getJSON(ctx, client, g.base+"/status", &st); err == nil && ok(st) {
			return time.Since(g.started), nil
		}
		select {
		case <-g.p.Done():
			return 0, fmt.Errorf("meshgw exited: %v (see %s)", g.p.Err(), g.log)
		case <-ctx.Done():
			return 0, fmt.Errorf("meshgw's /status did not reach the expected state within %s", within)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// heapAlloc forces a garbage collection in meshgw (pprof's heap?gc=1) and returns the bytes
// its heap then holds (runtime.MemStats.HeapAlloc), and its resident set size.
func (g *controlGateway) heapAlloc(ctx context.Context) (heap, rss int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.metrics+"/debug/pprof/heap?gc=1&debug=1", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	if heap, err = memStat(body, "HeapAlloc"); err != nil {
		return 0, 0, err
	}
	rss, _, err = rssBytes(g.p.Pid())
	return heap, rss, err
}

// memStat reads "# NAME = VALUE" from the text heap profile pprof writes with debug=1.
func memStat(profile []byte, name string) (int64, error) {
	prefix := []byte("# " + name + " = ")
	for line := range bytes.Lines(profile) {
		if v, ok := bytes.CutPrefix(line, prefix); ok {
			return strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in meshgw's heap profile", name)
}

// stop ends the gateway (SIGTERM, SIGKILL after 10 s) and waits for it.
func (g *controlGateway) stop() { g.p.Stop(10 * time.Second) }

func getJSON(ctx context.Context, c *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// runRaftbench runs bench-raftbench with args and decodes the JSON it prints into v.
func runRaftbench(ps *procs, c *ControlOptions, name string, within time.Duration, v any, args ...string) error {
	var out bytes.Buffer
	p, err := ps.start(name, &out, c.RaftbenchBin, args...)
	if err != nil {
		return err
	}
	select {
	case <-p.Done():
	case <-time.After(within):
		p.Kill()
		return fmt.Errorf("%s did not finish within %s", name, within)
	}
	if p.Err() != nil {
		return fmt.Errorf("%s failed: %v (see %s)", name, p.Err(), filepath.Join(ps.dir, name+".log"))
	}
	return json.Unmarshal(out.Bytes(), v)
}

// quantiles returns the p50, p99 and max of ds in milliseconds; ds is sorted in place.
func quantiles(ds []time.Duration) (p50, p99, maxMs float64) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ds)
	ms := func(q float64) float64 {
		return float64(ds[min(len(ds)-1, int(q*float64(len(ds))))].Microseconds()) / 1000
	}
	return ms(0.50), ms(0.99), ms(1)
}

// tempStateDir makes a fresh folder for a gateway's --state-dir under the work directory.
func tempStateDir(o *Options, name string) (string, error) {
	dir := filepath.Join(o.WorkDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}
