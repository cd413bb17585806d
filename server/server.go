// Package server assembles one whole meshgw gateway from a Config and runs it: the raft node
// with the durable worker records, the mesh, forwarding to the leader and the leader's duties,
// the worker pool and what drives it, the gRPC services, the data plane, the probe and metrics
// listeners, and the order in which all of it starts and stops.
//
// A Server goes through three calls: New checks the Config and starts nothing, Start builds
// and starts everything (and stops it again when a part fails), Run serves until its context
// ends and then stops in order. Reload may be called at any time from New on.
package server

import (
	"cmp"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/consensus/fleetack"
	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/gateway"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/ownership"
)

// Server is one gateway. Its addresses are known once Start returned.
type Server struct {
	cfg    Config
	nodeID string
	log    *slog.Logger
	reg    *prometheus.Registry
	sec    *security

	// hup is what Reload reads: the mesh, once the cluster started. Reload runs from New on,
	// before the mesh exists, so the mesh is handed over under a lock (reload.go).
	hup struct {
		sync.Mutex
		mesh *mesh.Mesh
	}

	// Set by Start.
	started     bool // Start succeeded
	cl          *cluster
	gw          *gateway.Gateway
	operator    *ownership.Operator
	left        chan struct{} // closed once this gateway left the mesh on its drain
	errc        chan error    // a listener that failed
	metricsSrv  *http.Server
	probeLn     net.Listener // bound first of all (bindListeners), nil without Config.ProbeAddr
	metricsLn   net.Listener // likewise, without Config.MetricsAddr
	probeAddr   string
	metricsAddr string
	// stops are what Start started that stops on the way out, run last first (as defers).
	stops []func()
}

// New checks cfg and resolves the node id; it starts nothing, so that Reload is safe from
// here on. A node id the TLS certificate does not name (TLSConfig.CheckNodeID) is an error.
func New(cfg Config) (*Server, error) {
	if cfg.Listener == nil {
		return nil, errors.New("server: Config.Listener is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Cluster.GossipKeyFile != "" && cfg.Cluster.ReadGossipKeys == nil {
		return nil, errors.New("server: Config.Cluster.GossipKeyFile needs ReadGossipKeys")
	}
	c := &cfg.Cluster
	c.DeadVoterGrace = cmp.Or(c.DeadVoterGrace, voters.DefaultDeadVoterGrace)
	c.ReconcileInterval = cmp.Or(c.ReconcileInterval, voters.DefaultReconcileInterval)
	c.OwnerFailoverGrace = cmp.Or(c.OwnerFailoverGrace, ownership.DefaultFailoverGrace)
	c.FleetAckTimeout = cmp.Or(c.FleetAckTimeout, fleetack.DefaultTimeout)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, DefaultDrainTimeout)
	s := &Server{cfg: cfg, nodeID: cfg.NodeID, log: cfg.Logger, reg: cfg.Registry, sec: newSecurity(cfg.TLS, cfg.Gateway.AdminAPIKey)}
	if s.nodeID == "" {
		s.nodeID = nodeIDOf(cfg.Listener.Addr())
	}
	if check := cfg.TLS.CheckNodeID; check != nil {
		if err := check(s.nodeID); err != nil {
			return nil, err
		}
	}
	if w := cfg.TLS.Warning; w != "" {
		s.log.Warn(w)
	}
	return s, nil
}

// nodeIDOf is the default node id: the listener's host_port.
func nodeIDOf(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host + "_" + port
}

// NodeID is this gateway's node id.
func (s *Server) NodeID() string { return s.nodeID }

// Addr is the data plane's address.
func (s *Server) Addr() string { return s.cfg.Listener.Addr().String() }

// ProbeAddr is the probe listener's address ("" without Config.ProbeAddr).
func (s *Server) ProbeAddr() string { return s.probeAddr }

// MetricsAddr is the /metrics listener's address ("" without Config.MetricsAddr).
func (s *Server) MetricsAddr() string { return s.metricsAddr }

// RaftAddr is the address raft advertises.
func (s *Server) RaftAddr() string { return s.cl.node.Address() }

// MeshAddr is the mesh's address, which others join.
func (s *Server) MeshAddr() string { return s.cl.mesh.Addr() }

// RPCAddr is the gRPC listener's advertised address.
func (s *Server) RPCAddr() string { return s.cl.rpcAddr }
