package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"k8s.io/client-go/kubernetes"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fleetack"
	"github.com/meshgw/meshgw/consensus/forward"
	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/ctxtime"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/leader"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/ownership"
	"github.com/meshgw/meshgw/storage"
	"github.com/meshgw/meshgw/version"
)

// Bounds of the cluster's background work and of its part of a shutdown.
const (
	// meshUpdateTimeout bounds one metadata update and the leave at shutdown.
	meshUpdateTimeout = 2 * time.Second
	// rpcStopGrace bounds the wait for forwarded writes in flight at shutdown.
	rpcStopGrace = 2 * time.Second
	// joinBackoffMin and joinBackoffMax bound the wait between attempts to join --join.
	joinBackoffMin = 500 * time.Millisecond
	joinBackoffMax = 30 * time.Second
)

// cluster is this gateway's part of the gateway cluster: the raft node, the mesh, the gRPC
// listener serving writes forwarded to the leader, the forwarder of its own writes, and the
// background loops joining the two (metadata, joining, bootstrap-expect, catching up).
type cluster struct {
	cfg    *Config
	sec    *security
	nodeID string
	// startTime is when this gateway started: published in the mesh metadata (Started), it
	// names the process a drain mark drains (drain.go).
	startTime time.Time
	log       *slog.Logger
	base      *slog.Logger // without the component, for the mesh, which names its own
	reg       prometheus.Registerer

	node *consensus.Node
	mesh *mesh.Mesh
	// members is the mesh as the voter reconciler reads it, for the voters wanted (Info).
	members *membership
	// owners is the mesh as ownership reads it; handoffs counts the moves of every reason.
	owners   ownership.Membership
	handoffs *ownership.Metrics
	fwd      *forward.Forwarder
	rpc      *grpc.Server
	rpcLn    net.Listener // served from serve on; closed by shutdown when never served
	rpcAddr  string       // advertised
	serving  bool         // serve ran
	// fatal receives the error that stops the gateway when it cannot join for good: its node
	// id is a live gateway's, or the peers it joins belong to another raft cluster (joinLoop).
	// Run returns it.
	fatal chan error

	// acks makes admin writes fleet-acknowledged (acks.go); its data plane is set once the
	// reconciler exists.
	acks *fleetack.FleetAck

	caughtUp chan struct{}
	// nodeSet is closed once consensus.Start returned node: raft may run the leader loop before.
	nodeSet      chan struct{}
	caughtUpOnce sync.Once
	// rejoined receives once this node's rejoining ended, so that its metadata says so at once:
	// the leader promotes it only then.
	rejoined chan struct{}
	// duties are what this node runs while it leads (leaderDuties), set once node and mesh are.
	duties leader.Loop
	// disc is Kubernetes discovery's writer (discovery.go); nil without it. kube is the API
	// server's client with discovery or --router-selector.
	disc *discovery
	kube kubernetes.Interface

	ctx      context.Context // ends at shutdown
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// startCluster opens the gRPC listener and binds the mesh's port, then starts raft (which binds
// its own port before it starts), then the mesh on the port bound (its metadata carries the raft
// and gRPC addresses), and builds the gRPC server and the forwarder: a port in use stops it
// before raft started. httpAddr is the data plane's listener. The gRPC listener serves from
// serve on; the mesh joins, and the loops start, from join on.
func startCluster(cfg *Config, sec *security, nodeID string, httpAddr net.Addr, reg prometheus.Registerer,
	log *slog.Logger) (*cluster, error) {
	c := &cluster{cfg: cfg, sec: sec, nodeID: nodeID, startTime: time.Now(), log: log.With("component", "cluster"), base: log, reg: reg,
		caughtUp: make(chan struct{}), nodeSet: make(chan struct{}), rejoined: make(chan struct{}, 1), fatal: make(chan error, 1)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	dir, err := nodeDir(cfg, nodeID, log)
	if err != nil {
		return nil, err
	}
	if c.handoffs, err = ownership.NewMetrics(reg); err != nil {
		return nil, err
	}
	if err := c.connectKube(); err != nil {
		return nil, err
	}
	f := &cfg.Cluster
	rcfg := cfg.Raft
	rcfg.NodeID, rcfg.AdvertiseHost, rcfg.StateDir, rcfg.Logger = nodeID, f.AdvertiseHost, dir, log
	rcfg.Registerer, rcfg.Join, rcfg.BootstrapExpect, rcfg.TLS = reg, f.Join, f.BootstrapExpect, sec.raftTLS()
	rcfg.ClusterKey = sec.raftKey()
	rcfg.LeaderLoop = c.leaderLoop
	// The raft hello reads the mesh, which starts after raft and joins last: until the join
	// merged, every address gets the hello, and a connection whose hello carries a cluster id
	// is refused unless raft's state holds that id (docs/mesh.md, "Raft connections").
	var meshOf atomic.Pointer[mesh.Mesh]
	members := func() []mesh.Member {
		if m := meshOf.Load(); m != nil {
			return m.Members()
		}
		return nil
	}
	rcfg.SendHello = func(addr string) bool { return mesh.SpeaksRaftHello(members(), addr) }
	rcfg.JoiningCluster = consensus.JoiningFromMesh(nodeID, members)
	if c.rpcLn, err = c.listenRPC(); err != nil {
		return nil, err
	}
	meshLn, err := c.listenMesh()
	if err != nil {
		return nil, errors.Join(err, c.rpcLn.Close())
	}
	if c.node, err = consensus.Start(rcfg); err != nil {
		return nil, errors.Join(raftListenError(rcfg.BindAddr, err), c.rpcLn.Close(), meshLn.Close())
	}
	close(c.nodeSet)
	if err := ownership.RegisterOwned(reg, c.node.WorkersShared); err != nil {
		return nil, errors.Join(err, c.rpcLn.Close(), meshLn.Close(), c.node.Shutdown())
	}
	if c.mesh, err = c.startMesh(httpAddr, meshLn, reg); err != nil { // on an error, mesh.Start closed meshLn
		_ = c.rpcLn.Close()
		return nil, errors.Join(err, c.node.Shutdown())
	}
	meshOf.Store(c.mesh)
	c.members = &membership{mesh: c.mesh, node: c.node}
	c.owners = owners{c.members}
	duties, err := c.leaderDuties()
	if err != nil {
		c.shutdown()
		return nil, err
	}
	c.duties.Set(duties...)
	c.rpc = grpc.NewServer(sec.serverOptions(c.mesh, c.base)...)
	forward.Register(c.rpc, c.node, c.base)
	if err := c.startFleetAck(); err != nil {
		c.shutdown()
		return nil, err
	}
	if c.fwd, err = forward.New(c.node, forward.Options{ResolveRPC: c.resolveRPC, Credentials: sec.dialCreds(), DialOptions: sec.keyDialOptions(), Logger: c.base}); err != nil {
		c.shutdown()
		return nil, err
	}
	return c, nil
}

// nodeDir is this node's folder of the durable state, made private (storage's doc), and
// logged; "" with Raft.Ephemeral.
func nodeDir(cfg *Config, nodeID string, log *slog.Logger) (string, error) {
	if cfg.Raft.Ephemeral {
		return "", nil
	}
	loc, err := storage.ResolveStateDir(cfg.StateDir, cfg.Getenv, cfg.Getenv("HOME"))
	if err != nil {
		return "", err
	}
	dir, err := storage.PrepareNodeDir(loc.Path, nodeID, log)
	if err != nil {
		return "", err
	}
	log.Info("state dir", "path", dir.Path, "from", loc.Source)
	return dir.Path, nil
}

// serve registers more gRPC services (outcome reports, cache sync, gRPC health) and serves the
// gRPC listener. Call it once.
func (c *cluster) serve(services ...func(*grpc.Server)) {
	for _, register := range services {
		register(c.rpc)
	}
	c.serving = true
	go func() {
		if err := c.rpc.Serve(c.rpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			c.log.Error("the gRPC listener failed", "err", err)
		}
	}()
}

// join starts the loops that need no pool: joining --join (or --router-selector's pods) in the
// background, with --bootstrap-expect bootstrapping together, and catching up. It is Start's
// last step, once every listener is bound and everything else started, so that a start that
// fails has joined nothing: no peer lists a gateway that never ran, and no raft leader adds it.
// Call it once, after serve.
func (c *cluster) join() {
	f := &c.cfg.Cluster
	if len(f.Join) > 0 {
		c.goLoop("join", func() { c.joinLoop(f.Join) })
	}
	if d := c.cfg.Discovery; d != nil && d.RouterSelector != nil {
		c.goLoop("router selector", c.routerJoinLoop)
	}
	if n := f.BootstrapExpect; n > 0 && !c.node.HasState() {
		b := consensus.ExpectBootstrap{Expect: n, Self: c.nodeID, Node: c.node, Members: c.mesh, Logger: c.log}
		c.goLoop("bootstrap-expect", func() { b.Run(c.ctx) })
	}
	c.goLoop("catch up", c.catchUp)
}

// leaderDuties are the duties this node runs while it leads: the voter reconciler, failover,
// the automatic rebalance (with --auto-rebalance), clearing finished drains, and Kubernetes
// discovery (with --service-discovery).
func (c *cluster) leaderDuties() ([]leader.Duty, error) {
	f := &c.cfg.Cluster
	reconciler, err := voters.NewReconciler(voters.Config{
		Node: c.node, Membership: c.members, Voters: f.Voters, DeadVoterGrace: f.DeadVoterGrace,
		ReconcileInterval: f.ReconcileInterval, Logger: c.base,
	})
	if err != nil {
		return nil, err
	}
	failover, err := ownership.NewFailoverReconciler(ownership.FailoverConfig{
		Store: c.node, Membership: c.owners, Grace: f.OwnerFailoverGrace,
		ReconcileInterval: f.ReconcileInterval, Registerer: c.reg, Metrics: c.handoffs, Logger: c.base,
	})
	if err != nil {
		return nil, err
	}
	duties := []leader.Duty{reconciler, failover, ownership.DrainClearer{View: c.drainView(), Apply: c.node, Logger: c.log}}
	disc, duty, err := c.discoveryDuty()
	if err != nil {
		return nil, err
	}
	if c.disc = disc; duty != nil {
		duties = append(duties, duty)
	}
	if f.AutoRebalance {
		rebalance, err := ownership.NewAutoRebalancer(ownership.AutoRebalanceConfig{Store: c.node, Membership: c.owners,
			ReconcileInterval: f.ReconcileInterval, Metrics: c.handoffs, Logger: c.base})
		if err != nil {
			return nil, err
		}
		duties = append(duties, rebalance)
	}
	return duties, nil
}

// catchUp marks raft state current on a follower once it caught up with its leader
// (consensus.CatchUp). It ends early when this node leads, whose leader loop marks it.
func (c *cluster) catchUp() {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	go func() {
		select {
		case <-c.caughtUp:
			cancel()
		case <-ctx.Done():
		}
	}()
	cu := consensus.CatchUp{Self: c.nodeID, Node: c.node, Barrier: c.acks.Barrier, Logger: c.log}
	if leader, ok := cu.Wait(ctx); ok {
		why := "applied what the leader " + leader + " had committed"
		c.markCaughtUp(why)
		if err := c.node.Rejoined(why); err != nil {
			c.log.Error("cannot end rejoining; this node keeps refusing votes until it restarts and catches up again", "err", err)
			return
		}
		select {
		case c.rejoined <- struct{}{}:
		default:
		}
	}
}

// listenMesh binds ClusterConfig.MeshBind:MeshPort, TCP and UDP, for the mesh to start on.
func (c *cluster) listenMesh() (*mesh.Listener, error) {
	f := &c.cfg.Cluster
	ln, err := mesh.Listen(f.MeshBind, f.MeshPort, c.base)
	if le := (*mesh.ListenError)(nil); errors.As(err, &le) {
		return nil, fmt.Errorf("cannot listen on --mesh-port %s: %v", le.Addr, le.Err)
	}
	return ln, err
}

// raftListenError names --raft-port in consensus.Start's error when raft could not bind bind,
// its Config.BindAddr: the error of every other listener names its flag.
func raftListenError(bind string, err error) error {
	op := (*net.OpError)(nil)
	if !errors.As(err, &op) || op.Op != "listen" {
		return err
	}
	if bind == "" {
		bind = net.JoinHostPort("0.0.0.0", strconv.Itoa(consensus.DefaultRaftPort)) // consensus's default
	}
	return fmt.Errorf("cannot listen on --raft-port %s: %v", bind, op)
}

// listenRPC opens ClusterConfig.RPCBind:RPCPort and works out the address peers dial.
func (c *cluster) listenRPC() (net.Listener, error) {
	f := &c.cfg.Cluster
	bind := net.JoinHostPort(f.RPCBind, strconv.Itoa(f.RPCPort))
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on --rpc-host/--rpc-port %s: %v", bind, err)
	}
	c.rpcAddr = net.JoinHostPort(f.RPCAdvertise, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	return ln, nil
}

// startMesh starts memberlist on ln with this node's metadata. It keeps departed peers listed
// longer than a dead voter's (or owner's) grace plus a reconcile interval, so that the leader
// still sees a dead voter or owner when its grace runs out.
func (c *cluster) startMesh(httpAddr net.Addr, ln *mesh.Listener, reg prometheus.Registerer) (*mesh.Mesh, error) {
	f := &c.cfg.Cluster
	if !f.clustered() && f.AdvertiseHost == "" && net.ParseIP(f.MeshBind).IsUnspecified() {
		c.log.Warn("the mesh advertises 127.0.0.1 because it binds every interface; set --mesh-advertise-host before other gateways join this one",
			"bind", f.MeshBind)
	}
	httpPort := strconv.Itoa(httpAddr.(*net.TCPAddr).Port)
	return mesh.Start(mesh.Config{
		NodeID:        c.nodeID,
		BindAddr:      f.MeshBind,
		BindPort:      f.MeshPort,
		Listener:      ln,
		AdvertiseAddr: f.MeshAdvertise,
		Profile:       f.MeshProfile,
		EncryptKey:    gossipKey(c.cfg),
		Meta: mesh.Meta{
			NodeID:       c.nodeID,
			Version:      buildVersion(),
			Region:       c.cfg.Gateway.Region,
			Color:        c.cfg.Color,
			HTTPAddr:     net.JoinHostPort(f.HTTPAdvertise, httpPort),
			RPCAddr:      c.rpcAddr,
			RaftAddr:     c.node.Address(),
			ClusterID:    c.node.ClusterID(),
			AppliedIndex: c.node.AppliedIndex(),
			Incarnation:  c.node.Incarnation(),
			Rejoining:    c.node.Rejoining(),
			Started:      c.startTime,
			RaftHello:    true,
		},
		UpdateTimeout: meshUpdateTimeout,
		Retention:     max(mesh.DefaultRetention, max(f.DeadVoterGrace, f.OwnerFailoverGrace)+f.ReconcileInterval+time.Minute),
		Logger:        c.base,
		Registerer:    reg,
	})
}

// startPoolLoops starts the loop that needs the data plane's pool: the metadata publisher
// (owned-worker count). Imported workers take their state from their owners' bulletins
// (fleet.Importer), not from the mesh's view of the owner.
func (c *cluster) startPoolLoops(p *pool.Pool) {
	c.goLoop("mesh metadata", func() { c.metaLoop(p) })
}

// leave leaves the mesh gracefully, so that peers list this gateway as left and the leader
// removes it from the raft configuration at once. It runs after the data plane drained.
func (c *cluster) leave() {
	if err := c.mesh.Leave(meshUpdateTimeout); err != nil {
		c.log.Warn("leaving the mesh did not complete", "err", err)
	}
}

// shutdown stops the background loops, the fleet acknowledgements, the gRPC listener
// (forwarded writes in flight get rpcStopGrace), the forwarder, raft and the mesh, in that
// order. Calling it again does nothing.
func (c *cluster) shutdown() {
	c.stopOnce.Do(func() {
		c.cancel()
		c.wg.Wait()
		if c.acks != nil {
			_ = c.acks.Close() // first: it ends the acknowledgements the gRPC listener serves
		}
		if !c.serving {
			_ = c.rpcLn.Close()
		}
		if c.rpc != nil {
			stopped := make(chan struct{})
			go func() { c.rpc.GracefulStop(); close(stopped) }()
			t := time.NewTimer(rpcStopGrace)
			select {
			case <-stopped:
			case <-t.C:
				c.rpc.Stop()
				<-stopped
			}
			t.Stop()
		}
		if c.fwd != nil {
			_ = c.fwd.Shutdown()
		}
		if err := c.node.Shutdown(); err != nil {
			c.log.Warn("raft did not stop cleanly", "err", err)
		}
		if err := c.mesh.Shutdown(); err != nil {
			c.log.Warn("the mesh did not stop cleanly", "err", err)
		}
	})
}

// goLoop runs f in a goroutine that shutdown waits for, logging a panic with its stack.
func (c *cluster) goLoop(what string, f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				c.log.Error("panic in background goroutine", "goroutine", what, "panic", r, "stack", string(debug.Stack()))
			}
		}()
		f()
	}()
}

// wait waits d or until shutdown, and reports whether d passed.
func (c *cluster) wait(d time.Duration) bool { return ctxtime.Sleep(c.ctx, d) == nil }

// resolveRPC is the forwarder's address book: a peer's gRPC address from its mesh metadata.
func (c *cluster) resolveRPC(id string) (string, bool) {
	m, ok := c.member(id)
	if !ok || m.Status == mesh.StatusForeign || m.Meta.RPCAddr == "" {
		return "", false
	}
	return m.Meta.RPCAddr, true
}

// leaderLoop is raft's leader loop for this node. The leader's state is current once raft's
// Barrier returned (the leader loop runs after it); the leader's duties (leaderDuties) run side
// by side for the term; all end with ctx. A single voter can win its election before
// consensus.Start has returned the node, so the loop first waits for it.
func (c *cluster) leaderLoop(ctx context.Context) {
	select {
	case <-c.nodeSet:
	case <-ctx.Done():
		return
	}
	c.markCaughtUp("this node leads")
	c.duties.Run(ctx)
}

func (c *cluster) markCaughtUp(why string) {
	c.caughtUpOnce.Do(func() {
		c.log.Info("raft state is current", "why", why, "applied_index", c.node.AppliedIndex())
		close(c.caughtUp)
	})
}

// buildVersion is the version make build stamped ("dev" for a plain go build).
func buildVersion() string { return version.Short() }
