package bench

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// fleetAckSizes are the cluster sizes the fleet-acknowledged writes are measured at.
var fleetAckSizes = []int{3, 5}

// fleetAckWrites starts n gateways joined on loopback (the first bootstraps, the others join
// it; 3 voters and the rest non-voters, each on its own state directory), registers one worker
// and times writes PUT disabling and enabling it in turn, sent to each gateway in turn (so
// most are forwarded to the leader), each answered once every gateway applied it to its pool.
// An answer naming a lagging gateway fails the measurement.
// With inMemory, the state directories are on tmpfs (memoryDir), so that no append waits for
// a disk: what is left is the gateways' and the network's share.
func fleetAckWrites(ctx context.Context, ps *procs, o *Options, n, writes int, inMemory bool) (*WriteLatency, error) {
	dir, err := tempStateDir(o, fmt.Sprintf("fleet-ack-%d", n))
	where := "bbolt on disk"
	if inMemory {
		dir, err = memoryDir(fmt.Sprintf("fleet-ack-%d", n))
		where = "state directories on tmpfs (" + memoryFS + ": no disk wait)"
	}
	if err != nil {
		return nil, err
	}
	if inMemory {
		defer os.RemoveAll(dir)
	}
	gws := make([]*controlGateway, 0, n)
	defer func() {
		for _, g := range gws {
			g.stop()
		}
	}()
	var seed string
	for i := range n {
		g, mesh, err := startMeshGateway(ps, o, fmt.Sprintf("fa%d-%d", n, i+1), filepath.Join(dir, strconv.Itoa(i)), seed)
		if err != nil {
			return nil, err
		}
		gws = append(gws, g)
		if i == 0 {
			seed = mesh
		}
	}
	client := &http.Client{Timeout: 15 * time.Second}
	if err := waitFormedBench(ctx, client, gws, 60*time.Second); err != nil {
		return nil, err
	}
	var reg struct {
		ID string `json:"id"`
	}
	if err := send(ctx, client, http.MethodPost, gws[0].base+"/workers", `{"url":"http://127.0.0.1:9"}`, &reg); err != nil {
		return nil, err
	}
	body := [2]string{`{"disabled":true,"reason":"bench"}`, `{"disabled":false}`}
	var ans struct {
		FleetAck *struct {
			Lagging []string `json:"lagging"`
		} `json:"fleet_ack"`
	}
	put := func(i int) error {
		ans.FleetAck = nil
		if err := send(ctx, client, http.MethodPut, gws[i%n].base+"/workers/"+reg.ID, body[i%2], &ans); err != nil {
			return err
		}
		if ans.FleetAck == nil {
			return fmt.Errorf("the answer of gateway %d has no fleet_ack", i%n+1)
		}
		if len(ans.FleetAck.Lagging) > 0 {
			return fmt.Errorf("write %d: gateways %v lagged", i, ans.FleetAck.Lagging)
		}
		return nil
	}
	for i := range 50 { // warm-up: connections, bbolt pages
		if err := put(i); err != nil {
			return nil, err
		}
	}
	lat := make([]time.Duration, 0, writes)
	start := time.Now()
	for i := range writes {
		t0 := time.Now()
		if err := put(i); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	took := time.Since(start)
	p50, p99, mx := quantiles(lat)
	return &WriteLatency{Nodes: n, Writes: len(lat), P50Ms: p50, P99Ms: p99, MaxMs: mx, WritesPerSec: float64(len(lat)) / took.Seconds(),
		What: "PUT /workers/{id} {\"disabled\": …} sent to each gateway in turn, answered once every gateway's pool applied it " +
			"(fleet_ack with no lagging gateway); gateways on loopback, " + where}, nil
}

// memoryFS is where memoryDir makes its directories: tmpfs on Linux.
const memoryFS = "/dev/shm"

// memoryDir makes a fresh directory on tmpfs, or says why it cannot.
func memoryDir(name string) (string, error) {
	if err := noTmpfs(); err != nil {
		return "", err
	}
	return os.MkdirTemp(memoryFS, "meshgw-bench-"+name+"-")
}

// noTmpfs says why memoryDir cannot work here, or nil.
func noTmpfs() error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(memoryFS, &st); err != nil {
		return fmt.Errorf("no %s: %w", memoryFS, err)
	}
	if st.Type != tmpfsMagic {
		return fmt.Errorf("%s is not tmpfs", memoryFS)
	}
	return nil
}

// tmpfsMagic is tmpfs's file system type (statfs(2)).
const tmpfsMagic = 0x01021994

// startMeshGateway starts one gateway of a cluster on loopback, joining join (a mesh address)
// unless it is empty, and returns it with its own mesh address.
func startMeshGateway(ps *procs, o *Options, name, stateDir, join string) (*controlGateway, string, error) {
	var ports [4]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, "", err
		}
		ports[i] = p
	}
	args := []string{"--host", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--node-id", name,
		"--state-dir", stateDir, "--raft-port", strconv.Itoa(ports[1]), "--mesh-port", strconv.Itoa(ports[2]),
		"--rpc-port", strconv.Itoa(ports[3]), "--mesh-profile", "local", "--log-level", "warn", "--prometheus-port", "0",
		"--owner-failover-grace-secs", "86400"}
	if join != "" {
		args = append(args, "--join", join)
	}
	t0 := time.Now()
	p, err := ps.start(name, nil, o.MeshgwBin, args...)
	if err != nil {
		return nil, "", err
	}
	return &controlGateway{p: p, started: t0, log: filepath.Join(ps.dir, name+".log"),
		base: "http://127.0.0.1:" + strconv.Itoa(ports[0])}, "127.0.0.1:" + strconv.Itoa(ports[2]), nil
}

// lastLogLines returns the last n lines of the log at path, quoted after " last: ", or "" when
// it cannot be read: the work directory is removed at the end of a run, so an error carries
// them.
func lastLogLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	lines = lines[max(0, len(lines)-n):]
	return fmt.Sprintf(" last: %q", strings.Join(lines, " | "))
}

// waitFormedBench waits until every gateway lists every other alive and the raft
// configuration holds them all under one leader. When it does not within the bound, the error
// says what each gateway saw (or that it exited), with its log's path.
func waitFormedBench(ctx context.Context, client *http.Client, gws []*controlGateway, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	seen := make([]string, len(gws)) // what each gateway answered last
	formed := func() bool {
		leader, all := "", true
		for i, g := range gws {
			if g.p.Exited() {
				seen[i] = fmt.Sprintf("%s exited: %v (see %s)", g.base, g.p.Err(), g.log)
				all = false
				continue
			}
			var peers struct {
				Peers []struct{ Status string } `json:"peers"`
			}
			var raft struct {
				Leader  string     `json:"leader"`
				Servers []struct{} `json:"servers"`
			}
			if err := cmp.Or(getJSON(ctx, client, g.base+"/mesh/peers", &peers), getJSON(ctx, client, g.base+"/mesh/raft", &raft)); err != nil {
				seen[i] = fmt.Sprintf("%s: %v (see %s)", g.base, err, g.log)
				all = false
				continue
			}
			alive := 0
			for _, p := range peers.Peers {
				if p.Status == "alive" {
					alive++
				}
			}
			seen[i] = fmt.Sprintf("%s: %d alive, %d in raft, leader %q (see %s)", g.base, alive, len(raft.Servers), raft.Leader, g.log)
			if alive != len(gws) || len(raft.Servers) != len(gws) || raft.Leader == "" || (leader != "" && raft.Leader != leader) {
				all = false
				continue
			}
			leader = raft.Leader
		}
		return all
	}
	for !formed() {
		select {
		case <-ctx.Done():
			for i, g := range gws {
				seen[i] += lastLogLines(g.log, 2)
			}
			return fmt.Errorf("%d gateways did not form one cluster within %s: %s", len(gws), within, strings.Join(seen, "; "))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
