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
	"github.com/meshgw/meshgw/gateway/prefixindex"
	"github.com/meshgw/meshgw/ownership"
	"github.com/meshgw/meshgw/worker"
)

// Start wires and starts the gateway: it binds every listener first (the probe and metrics
// listeners, the gRPC listener and the mesh's port; raft binds its own before it starts), then
// starts the cluster (the raft node with the durable worker records, the mesh, forwarding),
// the worker pool and what drives it (the bulletin importer and publisher, the owned-worker
// manager), the gRPC services, then the data plane serving the pool what raft has applied,
// while Config.Workers are registered through raft in the background; it joins the mesh last.
// So a port in use, or any part that fails, stops the start before it joined anything. It logs
// "meshgw started" and returns; Run serves and stops. When a part fails, what started is stopped
// again, last first, and Start returns the error. Call it once.
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

// parts are what Start builds, handed from one step to the next.
type parts struct {
	cl       *cluster
	writer   *fleet.Writer
	gcfg     gateway.Config // the data plane's, as the steps complete it
	importer *fleet.Importer
	mgr      *owned.Manager
	outcomes *outcomeReports
	fc       *fleetCache        // nil: cache_aware's index is this gateway's own
	localIdx *prefixindex.Index // cache_aware's own index in --cache-scope local, nil otherwise
	gh       *grpcHealth
}

// start runs Start's steps in order; each adds what it started to the stops.
func (s *Server) start() error {
	if err := s.bindListeners(); err != nil {
		return err
	}
	cl, err := startCluster(&s.cfg, s.sec, s.nodeID, s.cfg.Listener.Addr(), s.reg, s.log)
	if err != nil {
		return err
	}
	s.cl = cl
	s.setHangupMesh(cl.mesh)
	s.onStop(cl.shutdown)
	// Writes go to the leader, from whichever gateway they reach.
	p := &parts{cl: cl, writer: &fleet.Writer{Node: cl.fwd, NodeID: s.nodeID, Logger: s.log}, gcfg: s.cfg.Gateway}
	s.onStop(p.writer.Close) // removals still waiting for raft end before raft stops
	for _, step := range []func(*parts) error{s.startPool, s.startServices, s.configureGateway, s.startDataPlane} {
		if err := step(p); err != nil {
			return err
		}
	}
	cl.join()
	s.started = true
	return nil
}

// startPool makes the worker pool and what drives it: the bulletin importer and publisher, and
// the owned-worker manager.
func (s *Server) startPool(p *parts) error {
	p.gcfg.NodeID = s.nodeID
	if p.gcfg.Policy == "" { // the gateway's default, named here so that the choices below see it
		p.gcfg.Policy = gateway.DefaultPolicy
	}
	if p.gcfg.CacheAware.Rule == "" {
		p.gcfg.CacheAware.Rule = policy.DefaultCacheRule
	}
	// A new worker starts pending until probes verify it; with health checks off it starts
	// ready (the owner then marks it ready anyway).
	p.gcfg.Pool = pool.New(pool.Config{StartPending: !s.cfg.Health.DisableHealthCheck})
	// Bulletins: the importer applies other owners' state to the pool; the publisher gossips the
	// state of the workers this gateway owns, as the manager tells it what changed.
	p.importer = fleet.NewImporter(fleet.ImporterConfig{NodeID: s.nodeID, Pool: p.gcfg.Pool, Heard: p.cl.mesh.Heard,
		DroppedEpoch: p.cl.mesh.DroppedEpoch, Logger: s.log})
	publisher := fleet.NewPublisher(p.cl.mesh, p.gcfg.Pool, nil, s.log)
	s.onStop(publisher.Close)
	// The owner's breakers judge hangs by this gateway's request timeout (breaker/hang.go).
	bcfg := s.cfg.Breaker
	bcfg.HangTimeout = p.gcfg.RequestTimeout
	mgr, err := owned.New(owned.Options{Pool: p.gcfg.Pool, NodeID: s.nodeID, Health: s.cfg.Health,
		Breaker: bcfg, Registerer: s.reg, Logger: s.log, OnRemove: p.writer.OnRemove,
		OnChange: publisher.Changed, OnForget: publisher.Forgotten, Seed: p.importer.Seed, OnDisown: p.importer.ImportDisowned})
	if err != nil {
		return err
	}
	p.mgr = mgr
	s.onStop(mgr.Close)
	publisher.Start(mgr)
	return nil
}

// startServices makes the gRPC services beside the cluster's (outcome reports, the fleet
// cache, grpc.health.v1) and serves the gRPC listener with them.
func (s *Server) startServices(p *parts) error {
	// Outcome reports: the service takes other gateways' outcomes for the workers this one owns;
	// the reporter sends the outcomes of workers owned elsewhere to their owners, at the gRPC
	// address the mesh publishes.
	outcomes, err := newOutcomeReports(s.nodeID, p.cl.resolveRPC, s.sec.dialOptions(), p.mgr, s.reg, s.log)
	if err != nil {
		return err
	}
	p.outcomes = outcomes
	s.onStop(outcomes.close) // before the gRPC listener's graceful stop, which waits for open streams
	// cache_aware's fleet-wide index and load: served for the workers this gateway owns,
	// subscribed from every peer.
	if p.gcfg.Policy == policy.CacheAware && s.cfg.CacheFleet {
		owns := func(id worker.ID) bool { _, ok := p.mgr.Status(id); return ok }
		peers := func() []string { return livePeers(p.cl.mesh, s.nodeID) }
		if p.fc, err = newFleetCache(s.nodeID, p.gcfg.CacheAware, p.gcfg.Pool, owns, peers, p.cl.resolveRPC, s.sec.dialOptions(),
			s.reg, s.log); err != nil {
			return err
		}
	}
	if p.gcfg.Policy == policy.CacheAware && !s.cfg.CacheFleet {
		if p.localIdx, err = newLocalIndex(p.gcfg.CacheAware, s.reg); err != nil {
			return err
		}
	}
	s.onStop(p.fc.close)
	p.gh = newGRPCHealth()
	p.cl.serve(outcomes.service.Register, p.gh.register, p.fc.register)
	return nil
}

// configureGateway completes the data plane's configuration: its hooks into the services, the
// admin API over the cluster, and the weight updates.
func (s *Server) configureGateway(p *parts) error {
	cl, node, g := p.cl, p.cl.node, &p.gcfg
	g.CacheFleet = p.fc.gatewayConfig()
	if p.localIdx != nil {
		g.CacheFleet.Index = p.localIdx // the policy's own, nothing shared: only its size is exported
	}
	g.Registerer, g.Logger = s.reg, s.log
	g.Quorum, g.Security = node.HasLeader, s.sec.status()
	g.OnReadiness = p.gh.set
	g.OnOutcome = func(w *pool.Worker, status int, connErr bool) {
		if w.Origin == pool.OriginMesh {
			p.outcomes.onOutcome(w, status, connErr)
			return
		}
		p.mgr.OnOutcome(w, status, connErr)
	}
	s.operator = ownership.NewOperator(ownership.OperatorConfig{Records: node, Membership: cl.owners, Apply: p.writer,
		Metrics: cl.handoffs, Logger: s.log})
	health := s.cfg.Health
	g.Admin = admin.Config{Records: node, Writer: p.writer, Fleet: cl.acks, Raft: cl, Runtime: p.mgr, Imports: p.importer, Peers: cl,
		Ownership: s.operator, Drainer: s.operator, Drains: cl, DrainTimeout: s.cfg.Cluster.DrainTimeout,
		DrainSettle: func(sp worker.Spec) time.Duration { return health.Merge(sp.ConnectionMode, sp.Health).DrainSettle },
		Journal:     node}
	stopWeights, err := startWeights(s.cfg.Raft.Ephemeral, s.nodeID, node, p.writer, cl, s.reg, s.log, &g.Admin)
	if err != nil {
		return err
	}
	s.onStop(stopWeights)
	dcfg := g.Admin
	dcfg.Pool, dcfg.NodeID, dcfg.Region = g.Pool, s.nodeID, g.Region
	cl.disc.serve(dcfg) // discovery writes through the admin API's POST and DELETE
	return nil
}

// startDataPlane builds the gateway, starts what keeps its pool in step with raft and the
// owners, registers Config.Workers in the background, and serves the data plane, the probes
// and /metrics.
func (s *Server) startDataPlane(p *parts) error {
	cl, node, log := p.cl, p.cl.node, s.log
	gw, err := gateway.New(p.gcfg)
	if err != nil {
		return err
	}
	if err := s.reg.Register(p.importer.Collector()); err != nil {
		gw.Close()
		return err
	}
	s.gw = gw
	cl.mesh.SetBulletinReceiver(p.importer)
	p.fc.start()
	reconciler := fleet.New(fleet.Config{NodeID: s.nodeID, Records: node, Pool: p.gcfg.Pool, Owner: p.mgr, Imports: p.importer,
		CaughtUp: cl.caughtUp, AppliedIndex: node.AppliedIndex, AppliedSignal: node.AppliedSignal, Logger: log})
	reconciler.Start()
	cl.acks.SetLocal(reconciler)
	s.onStop(reconciler.Stop)
	restoreImports(p.importer, node, log)
	s.onStop(fleet.KeepImports(p.importer, node, 0, log))
	cl.startPoolLoops(p.gcfg.Pool)
	s.left = make(chan struct{})
	cl.goLoop("drain duty", func() { cl.drainDuty(gw, s.left) })
	s.onStop(registerWorkers(p.writer, s.registrations(), log))
	s.errc = make(chan error, 3)
	go func() { s.errc <- gw.Serve(s.sec.httpListener(gw.ClientListener(s.cfg.Listener))) }()
	s.probeAddr = s.serveProbes()
	s.metricsSrv, s.metricsAddr = s.serveMetrics()
	attrs := []any{"listen", s.cfg.Listener.Addr().String(), "probe_listen", s.probeAddr, "metrics_listen", s.metricsAddr,
		"raft", node.Address(), "mesh", cl.mesh.Addr(), "rpc", cl.rpcAddr, "node_id", s.nodeID, "region", p.gcfg.Region, "color", s.cfg.Color,
		"workers", len(s.cfg.Workers), "policy", p.gcfg.Policy}
	if p.gcfg.Policy == policy.CacheAware { // which of its rules and scopes runs: SMG's flags act only under --cache-rule smg
		scope := "local"
		if s.cfg.CacheFleet {
			scope = "fleet"
		}
		attrs = append(attrs, "cache_rule", p.gcfg.CacheAware.Rule, "cache_scope", scope)
	}
	attrs = append(attrs, "tls", s.sec.enabled(), "tls_http", s.sec.enabled() && s.cfg.TLS.HTTP, "max_buffered_body_mb", p.gcfg.MaxBufferedBody>>20)
	log.Info("meshgw started", attrs...)
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
