package server

import (
	"errors"
	"time"

	"github.com/meshgw/meshgw/gateway"
	"github.com/meshgw/meshgw/gateway/admin"
	"github.com/meshgw/meshgw/gateway/fleet"
	"github.com/meshgw/meshgw/gateway/owned"
	"github.com/meshgw/meshgw/gateway/policy"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/ownership"
	"github.com/meshgw/meshgw/worker"
)

// Start wires and starts the gateway: the cluster first (the raft node with the durable worker
// records, the mesh, forwarding), then the worker pool and what drives it (the bulletin
// importer and publisher, the owned-worker manager), the gRPC services, then the data plane
// serving the pool what raft has applied, while Config.Workers are registered through raft in
// the background. It logs "meshgw started" and returns; Run serves and stops. When a part
// fails, what started is stopped again, last first, and Start returns the error. Call it once.
func (s *Server) Start() error {
	if err := s.start(); err != nil {
		s.stop()
		return err
	}
	return nil
}

// onStop adds f to what stops on the way out; the last added runs first, as a defer would.
func (s *Server) onStop(f func()) { s.stops = append(s.stops, f) }

// stop runs the stops, last first, once.
func (s *Server) stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}

func (s *Server) start() error {
	cfg, log, reg, nodeID := &s.cfg, s.log, s.reg, s.nodeID
	cl, err := startCluster(cfg, s.sec, nodeID, cfg.Listener.Addr(), reg, log)
	if err != nil {
		return err
	}
	s.cl = cl
	s.setHangupMesh(cl.mesh)
	s.onStop(cl.shutdown)
	node := cl.node
	// Writes go to the leader, from whichever gateway they reach.
	writer := &fleet.Writer{Node: cl.fwd, NodeID: nodeID, Logger: log}
	s.onStop(writer.Close) // removals still waiting for raft end before raft stops
	gcfg := cfg.Gateway
	gcfg.NodeID = nodeID
	// A new worker starts pending until probes verify it; with health checks off it starts
	// ready (the owner then marks it ready anyway).
	gcfg.Pool = pool.New(pool.Config{StartPending: !cfg.Health.DisableHealthCheck})
	// Bulletins: the importer applies other owners' state to the pool; the publisher gossips the
	// state of the workers this gateway owns, as the manager tells it what changed.
	importer := fleet.NewImporter(fleet.ImporterConfig{NodeID: nodeID, Pool: gcfg.Pool, Heard: cl.mesh.Heard,
		DroppedEpoch: cl.mesh.DroppedEpoch, Logger: log})
	publisher := fleet.NewPublisher(cl.mesh, gcfg.Pool, nil, log)
	s.onStop(publisher.Close)
	// The owner's breakers judge hangs by this gateway's request timeout (breaker/hang.go).
	bcfg := cfg.Breaker
	bcfg.HangTimeout = gcfg.RequestTimeout
	mgr, err := owned.New(owned.Options{Pool: gcfg.Pool, NodeID: nodeID, Health: cfg.Health,
		Breaker: bcfg, Registerer: reg, Logger: log, OnRemove: writer.OnRemove,
		OnChange: publisher.Changed, OnForget: publisher.Forgotten, Seed: importer.Seed, OnDisown: importer.ImportDisowned})
	if err != nil {
		return err
	}
	s.onStop(mgr.Close)
	publisher.Start(mgr)
	// Outcome reports: the service takes other gateways' outcomes for the workers this one owns;
	// the reporter sends the outcomes of workers owned elsewhere to their owners, at the gRPC
	// address the mesh publishes.
	outcomes, err := newOutcomeReports(nodeID, cl.resolveRPC, s.sec.dialOptions(), mgr, reg, log)
	if err != nil {
		return err
	}
	s.onStop(outcomes.close) // before the gRPC listener's graceful stop, which waits for open streams
	// cache_aware's fleet-wide index and load: served for the workers this gateway owns,
	// subscribed from every peer.
	var fc *fleetCache
	if gcfg.Policy == policy.CacheAware && cfg.CacheFleet {
		fc, err = newFleetCache(nodeID, gcfg.CacheAware, gcfg.Pool, func(id worker.ID) bool { _, ok := mgr.Status(id); return ok },
			func() []string { return livePeers(cl.mesh, nodeID) }, cl.resolveRPC, s.sec.dialOptions(), reg, log)
		if err != nil {
			return err
		}
	}
	s.onStop(fc.close)
	gh := newGRPCHealth()
	cl.serve(outcomes.service.Register, gh.register, fc.register)
	gcfg.CacheFleet = fc.gatewayConfig()
	gcfg.Registerer, gcfg.Logger = reg, log
	gcfg.Quorum, gcfg.Security = node.HasLeader, s.sec.status()
	gcfg.OnReadiness = gh.set
	gcfg.OnOutcome = func(w *pool.Worker, status int, connErr bool) {
		if w.Origin == pool.OriginMesh {
			outcomes.onOutcome(w, status, connErr)
			return
		}
		mgr.OnOutcome(w, status, connErr)
	}
	s.operator = ownership.NewOperator(ownership.OperatorConfig{Records: node, Membership: cl.owners, Apply: writer,
		Metrics: cl.handoffs, Logger: log})
	health := cfg.Health
	gcfg.Admin = admin.Config{Records: node, Writer: writer, Fleet: cl.acks, Raft: cl, Runtime: mgr, Imports: importer, Peers: cl,
		Ownership: s.operator, Drainer: s.operator, Drains: cl, DrainTimeout: cfg.Cluster.DrainTimeout,
		DrainSettle: func(sp worker.Spec) time.Duration { return health.Merge(sp.ConnectionMode, sp.Health).DrainSettle },
		Journal:     node}
	stopWeights, err := startWeights(cfg.Raft.Ephemeral, nodeID, node, writer, cl, reg, log, &gcfg.Admin)
	if err != nil {
		return err
	}
	s.onStop(stopWeights)
	gw, err := gateway.New(gcfg)
	if err != nil {
		return err
	}
	if err := reg.Register(importer.Collector()); err != nil {
		gw.Close()
		return err
	}
	s.gw = gw
	cl.mesh.SetBulletinReceiver(importer)
	fc.start()
	reconciler := fleet.New(fleet.Config{NodeID: nodeID, Records: node, Pool: gcfg.Pool, Owner: mgr, Imports: importer,
		CaughtUp: cl.caughtUp, AppliedIndex: node.AppliedIndex, AppliedSignal: node.AppliedSignal, Logger: log})
	reconciler.Start()
	cl.acks.SetLocal(reconciler)
	s.onStop(reconciler.Stop)
	restoreImports(importer, node, log)
	s.onStop(fleet.KeepImports(importer, node, 0, log))
	cl.startPoolLoops(gcfg.Pool)
	s.left = make(chan struct{})
	cl.goLoop("drain duty", func() { cl.drainDuty(gw, s.left) })
	s.onStop(registerWorkers(writer, s.registrations(), log))
	s.errc = make(chan error, 3)
	go func() { s.errc <- gw.Serve(s.sec.httpListener(cfg.Listener)) }()
	if s.probeAddr, err = s.startProbes(); err != nil {
		gw.Close()
		return err
	}
	if s.metricsSrv, s.metricsAddr, err = s.startMetrics(); err != nil {
		gw.Close()
		return err
	}
	log.Info("meshgw started", "listen", cfg.Listener.Addr().String(), "probe_listen", s.probeAddr, "metrics_listen", s.metricsAddr,
		"raft", node.Address(), "mesh", cl.mesh.Addr(), "rpc", cl.rpcAddr, "node_id", nodeID, "region", gcfg.Region, "color", cfg.Color,
		"workers", len(cfg.Workers), "policy", gcfg.Policy, "tls", s.sec.enabled(), "tls_http", s.sec.enabled() && cfg.TLS.HTTP,
		"max_buffered_body_mb", gcfg.MaxBufferedBody>>20)
	return nil
}

// registrations are Config.Workers as this gateway registers them: in its region unless the
// spec names one (a registration's default, DESIGN.md section 2).
func (s *Server) registrations() []worker.Spec {
	out := make([]worker.Spec, 0, len(s.cfg.Workers))
	for _, sp := range s.cfg.Workers {
		sp = sp.Clone()
		if sp.Region == "" {
			sp.Region = s.cfg.Gateway.Region
		}
		out = append(out, sp)
	}
	return out
}

// errNotStarted is Run's error without a successful Start.
var errNotStarted = errors.New("server: Run before a successful Start")
