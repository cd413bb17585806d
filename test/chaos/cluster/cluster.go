package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/meshgw/meshgw/test/loopport"
	"github.com/meshgw/meshgw/test/proc"
)

// Config says what to start.
type Config struct {
	Meshgw, Fakeworker string // the binaries
	Nodes, Engines     int
	Dir                string // state directories and logs go below it
	// Topology, when set, is the namespaces the run made (the harness runs in its hub): each
	// gateway runs in its own, with its own address and fixed ports. Otherwise every process
	// listens on 127.0.0.1 on ports free when the run started.
	Topology *Topology
	// WAN, when set, is the simulated WAN the run is over (Layout places the processes); the
	// harness reaches every address from inside its region (wan.Net.DialByAddress).
	WAN *WAN
	// Grace is --owner-failover-grace-secs.
	Grace time.Duration
}

// AdminKey is the gateways' --admin-api-key: an isolated run's harness is not on their loopback.
const AdminKey = "chaos-admin-key"

// RequestTimeout is the gateways' --request-timeout-secs: how long a request waits on a worker
// that does not answer before the gateway gives up on it.
const RequestTimeout = 3 * time.Second

// Node is one meshgw gateway.
type Node struct {
	ID, Host, NS                   string
	Region                         string // its --region in a WAN run, "" otherwise
	HTTP, Metrics, Mesh, Raft, RPC int
	Dir                            string
	mu                             sync.Mutex
	p                              *proc.Proc
	stopped                        bool
}

// URL is the gateway's data plane and admin base URL.
func (n *Node) URL() string { return "http://" + net.JoinHostPort(n.Host, strconv.Itoa(n.HTTP)) }

// MeshAddr is what another gateway's --join takes.
func (n *Node) MeshAddr() string { return net.JoinHostPort(n.Host, strconv.Itoa(n.Mesh)) }

// Engine is one fakeworker.
type Engine struct {
	Name, Host string
	NS, Region string // its namespace and region in a WAN run, "" otherwise
	Port       int
	p          *proc.Proc
}

// URL is the engine's base URL, what is registered.
func (e *Engine) URL() string { return "http://" + net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// Cluster is the running processes.
type Cluster struct {
	cfg     Config
	Nodes   []*Node
	Engines []*Engine
}

// New lays out the nodes and engines (addresses, ports, state directories) without starting
// anything.
func New(cfg Config) (*Cluster, error) {
	c := &Cluster{cfg: cfg}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "logs"), 0o700); err != nil {
		return nil, err
	}
	var gws, engs []Place
	if cfg.WAN != nil {
		gws, engs, _ = Layout(cfg.Nodes, cfg.Engines, len(cfg.WAN.Regions))
	}
	for i := range cfg.Nodes {
		n := &Node{ID: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1"}
		if w := cfg.WAN; w != nil {
			p := gws[i]
			n.Host, n.NS, n.Region = w.Net.Addr(p.Region, p.Host), w.Net.Namespace(p.Region), w.Regions[p.Region]
			n.HTTP, n.Metrics, n.Mesh, n.Raft, n.RPC = wanPorts(i)
		} else if cfg.Topology != nil {
			n.Host, n.NS = NodeAddr(i), cfg.Topology.NodeNS(i)
			n.HTTP, n.Metrics, n.Mesh, n.Raft, n.RPC = 30000, 29000, 39527, 39528, 39529
		} else {
			ports, err := freePorts(5)
			if err != nil {
				return nil, err
			}
			n.HTTP, n.Metrics, n.Mesh, n.Raft, n.RPC = ports[0], ports[1], ports[2], ports[3], ports[4]
		}
		n.Dir = filepath.Join(cfg.Dir, "state", n.ID)
		c.Nodes = append(c.Nodes, n)
	}
	for j := range cfg.Engines {
		e := &Engine{Name: fmt.Sprintf("e%d", j+1), Host: "127.0.0.1", Port: 8000}
		if w := cfg.WAN; w != nil {
			p := engs[j]
			e.Host, e.NS, e.Region = w.Net.Addr(p.Region, p.Host), w.Net.Namespace(p.Region), w.Regions[p.Region]
		} else if cfg.Topology != nil {
			e.Host = EngineAddr(j)
		} else {
			ports, err := freePorts(1)
			if err != nil {
				return nil, err
			}
			e.Port = ports[0]
		}
		c.Engines = append(c.Engines, e)
	}
	return c, nil
}

// Start starts the engines, then the first gateway, then the others joining it, and waits
// until every gateway sees every other alive and a raft leader.
func (c *Cluster) Start(ctx context.Context) error {
	for _, e := range c.Engines {
		var wrap []string
		if e.NS != "" {
			wrap = []string{"ip", "netns", "exec", e.NS}
		}
		p, err := start(e.Name, c.cfg.Fakeworker, []string{"--host", e.Host, "--port", strconv.Itoa(e.Port), "--node-name", e.Name}, wrap,
			filepath.Join(c.cfg.Dir, "logs", e.Name+".log"))
		if err != nil {
			return err
		}
		e.p = p
	}
	for _, e := range c.Engines {
		if err := waitFor(ctx, 15*time.Second, e.Name+" answers /_stats", func() bool { return proc.Status(e.URL()+"/_stats", "") == 200 }); err != nil {
			return err
		}
	}
	for i, n := range c.Nodes {
		if err := os.MkdirAll(n.Dir, 0o700); err != nil {
			return err
		}
		var join []string
		if i > 0 {
			join = []string{c.Nodes[0].MeshAddr()}
		}
		if err := c.startNode(ctx, n, join); err != nil {
			return err
		}
	}
	return c.WaitFormed(ctx, 60*time.Second)
}

// args is the command line of node n joining join.
func (c *Cluster) args(n *Node, join []string) []string {
	profile := "local"
	if n.Region != "" {
		profile = "wan" // raft's timings times 3 (--raft-multiplier auto)
	}
	args := []string{
		"--node-id", n.ID, "--host", n.Host, "--port", strconv.Itoa(n.HTTP),
		"--prometheus-host", n.Host, "--prometheus-port", strconv.Itoa(n.Metrics),
		"--mesh-port", strconv.Itoa(n.Mesh), "--raft-port", strconv.Itoa(n.Raft), "--rpc-port", strconv.Itoa(n.RPC),
		"--mesh-advertise-host", n.Host, "--mesh-profile", profile, "--state-dir", n.Dir,
		"--shutdown-settle-secs", "0", "--health-check-interval-secs", "1",
		"--request-timeout-secs", strconv.Itoa(int(RequestTimeout / time.Second)),
		"--owner-failover-grace-secs", strconv.Itoa(int(c.cfg.Grace / time.Second)),
		"--log-level", "info", "--admin-api-key", AdminKey, "--drain-timeout-secs", "20",
	}
	if n.Region != "" {
		args = append(args, "--region", n.Region)
	}
	if n.NS != "" {
		// Beyond loopback raft and gRPC want mutual TLS; the run's namespaces are its own.
		args = append(args, "--insecure")
	}
	for _, j := range join {
		args = append(args, "--join", j)
	}
	return args
}

func (c *Cluster) startNode(ctx context.Context, n *Node, join []string) error {
	var wrap []string
	if n.NS != "" {
		wrap = []string{"ip", "netns", "exec", n.NS}
	}
	p, err := start(n.ID, c.cfg.Meshgw, c.args(n, join), wrap, filepath.Join(c.cfg.Dir, "logs", n.ID+".log"))
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.p, n.stopped = p, false
	n.mu.Unlock()
	return waitFor(ctx, 30*time.Second, n.ID+" answers /liveness", func() bool {
		if p.Exited() {
			return true
		}
		return proc.Status(n.URL()+"/liveness", "") == 200
	})
}

// Node returns the node named id, nil when there is none.
func (c *Cluster) Node(id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Kill sends SIGKILL to n and waits for it to end.
func (c *Cluster) Kill(n *Node) {
	n.mu.Lock()
	p := n.p
	n.mu.Unlock()
	kill(p)
}

// Restart starts n again on its state directory, joining every other node, and waits until it
// answers /liveness.
func (c *Cluster) Restart(ctx context.Context, n *Node) error {
	var join []string
	for _, o := range c.Nodes {
		if o != n {
			join = append(join, o.MeshAddr())
		}
	}
	return c.startNode(ctx, n, join)
}

// WipeState removes n's state directory (n must be down) and makes it again, empty.
func (c *Cluster) WipeState(n *Node) error {
	if err := os.RemoveAll(n.Dir); err != nil {
		return err
	}
	return os.MkdirAll(n.Dir, 0o700)
}

// Stop sends SIGSTOP to n; Cont resumes it.
func (c *Cluster) Stop(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopped = true
	return signal(n.p, syscall.SIGSTOP)
}

// Cont sends SIGCONT to n.
func (c *Cluster) Cont(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopped = false
	return signal(n.p, syscall.SIGCONT)
}

// Running reports whether n's process runs (and is not stopped).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.p != nil && !n.p.Exited() && !n.stopped
}

// Exited reports whether n's process ended on its own (not killed by the harness) — a crash.
func (n *Node) Exited() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.p != nil && n.p.Exited()
}

// Close kills every process it started.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(func() { c.Kill(n) })
	}
	for _, e := range c.Engines {
		wg.Go(func() { kill(e.p) })
	}
	wg.Wait()
}

// Raft is the part of GET /mesh/raft the harness reads.
type Raft struct {
	Leader  string `json:"leader"`
	Servers []struct {
		ID       string `json:"id"`
		Suffrage string `json:"suffrage"`
	} `json:"servers"`
}

// Peers is the part of GET /mesh/peers the harness reads.
type Peers struct {
	Peers []Peer `json:"peers"`
}

// Peer is one gateway of GET /mesh/peers.
type Peer struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	Incarnation string `json:"incarnation"`
	Rejoining   bool   `json:"rejoining"`
}

// quick is the client of the harness's reads.
var quick = &http.Client{Timeout: 2 * time.Second}

// GetJSON reads url's JSON answer (an admin route's) into v; false unless it answered 200 with
// JSON.
func GetJSON(url string, v any) bool {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+AdminKey)
	resp, err := quick.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(v) == nil
}

// Leader returns the leader some running node names ("" when none answers with one).
func (c *Cluster) Leader() string {
	for _, n := range c.Nodes {
		var r Raft
		if n.Running() && GetJSON(n.URL()+"/mesh/raft", &r) && r.Leader != "" {
			return r.Leader
		}
	}
	return ""
}

// RaftView is the raft group as the first running gateway that names a leader sees it: the
// leader and the voters. ok is false when no running gateway names one.
func (c *Cluster) RaftView() (leader string, voters []string, ok bool) {
	for _, n := range c.Nodes {
		var r Raft
		if !n.Running() || !GetJSON(n.URL()+"/mesh/raft", &r) || r.Leader == "" {
			continue
		}
		for _, s := range r.Servers {
			if s.Suffrage == "voter" {
				voters = append(voters, s.ID)
			}
		}
		return r.Leader, voters, true
	}
	return "", nil, false
}

// Rejoining reports whether gateway id says it is rejoining: its raft state new, not yet
// confirmed caught up by a leader (it votes for nobody until then). Its own view decides; while
// it does not answer, whether some running gateway lists it rejoining. (Asking every gateway, as
// before, also waited for the gateways a partition elsewhere kept from hearing the news.)
func (c *Cluster) Rejoining(id string) bool {
	if n := c.Node(id); n != nil && n.Running() {
		var p Peers
		if GetJSON(n.URL()+"/mesh/peers", &p) {
			for _, peer := range p.Peers {
				if peer.ID == id {
					return peer.Rejoining
				}
			}
		}
	}
	for _, n := range c.Nodes {
		var p Peers
		if !n.Running() || !GetJSON(n.URL()+"/mesh/peers", &p) {
			continue
		}
		for _, peer := range p.Peers {
			if peer.ID == id && peer.Rejoining {
				return true
			}
		}
	}
	return false
}

// WaitFormed waits until every node sees every node alive, none rejoining, and the same leader.
func (c *Cluster) WaitFormed(ctx context.Context, d time.Duration) error {
	return waitFor(ctx, d, fmt.Sprintf("%d gateways alive with one leader", len(c.Nodes)), func() bool {
		leader := ""
		for _, n := range c.Nodes {
			var p Peers
			var r Raft
			if !GetJSON(n.URL()+"/mesh/peers", &p) || !GetJSON(n.URL()+"/mesh/raft", &r) || r.Leader == "" {
				return false
			}
			if leader != "" && r.Leader != leader {
				return false
			}
			leader = r.Leader
			alive := 0
			for _, peer := range p.Peers {
				if peer.Status == "alive" && !peer.Rejoining {
					alive++
				}
			}
			if alive != len(c.Nodes) {
				return false
			}
		}
		return true
	})
}

// Back is how long a gateway took to come back, from the start of the wait: until it saw a
// leader, and until another running gateway listed it alive.
type Back struct{ Leader, Alive time.Duration }

// WaitBack waits until n (running again) sees a leader while another running node lists it
// alive, and says when each first held. It ends early, with ok false, once handed returns
// true: someone else waits for n now.
func (c *Cluster) WaitBack(ctx context.Context, n *Node, d time.Duration, handed func() bool) (b Back, ok bool, err error) {
	start := time.Now()
	err = waitFor(ctx, d, n.ID+" back with a leader and seen alive", func() bool {
		if handed != nil && handed() {
			return true
		}
		if !n.Running() {
			return false
		}
		var r Raft
		leader := GetJSON(n.URL()+"/mesh/raft", &r) && r.Leader != ""
		if leader && b.Leader == 0 {
			b.Leader = max(time.Since(start), time.Nanosecond)
		}
		alive := c.seenAlive(n)
		if alive && b.Alive == 0 {
			b.Alive = max(time.Since(start), time.Nanosecond)
		}
		ok = leader && alive
		return ok
	})
	return b, ok, err
}

// seenAlive reports whether another running node lists n alive.
func (c *Cluster) seenAlive(n *Node) bool {
	for _, o := range c.Nodes {
		var p Peers
		if o == n || !o.Running() || !GetJSON(o.URL()+"/mesh/peers", &p) {
			continue
		}
		for _, peer := range p.Peers {
			if peer.ID == n.ID && peer.Status == "alive" {
				return true
			}
		}
	}
	return false
}

// freePorts returns n distinct ports of 127.0.0.1 free for TCP and UDP a moment ago
// (loopport.Free).
func freePorts(n int) ([]int, error) {
	out := make([]int, n)
	for i := range out {
		p, err := loopport.Free(1)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}
