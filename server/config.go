package server

import (
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/certs"
	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/discovery/kube"
	"github.com/meshgw/meshgw/gateway"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

// DefaultDrainTimeout is ClusterConfig.DrainTimeout's default (--drain-timeout-secs).
const DefaultDrainTimeout = 120 * time.Second

// Config is one gateway, in plain values and the sub-configs of the packages it assembles.
// cmd/meshgw makes it from its flags; a test makes it by hand.
type Config struct {
	// Listener is the data plane's listener. Required. The caller closes it after Run returned
	// (the shutdown stops serving it).
	Listener net.Listener
	// NodeID names this gateway in raft, the mesh and the records (--node-id). Default: the
	// Listener's host_port.
	NodeID string
	// Color is a free label of this gateway (--color), published in its mesh metadata.
	Color string

	// Gateway is the data plane's configuration (gateway.Config). The server sets its NodeID,
	// Pool, Registerer, Logger, Quorum, Security, OnReadiness, OnOutcome, Admin and CacheFleet;
	// every other field is the caller's (policy, retries, limits, admin key, request log).
	Gateway gateway.Config
	// CacheFleet makes cache_aware's prefix index and load fleet-wide (--cache-scope fleet):
	// each worker's owner keeps them and every gateway holds a copy. Ignored unless
	// Gateway.Policy is cache_aware.
	CacheFleet bool
	// Workers are registered through raft in the background once the gateway serves
	// (--worker-urls, --worker-config), in Gateway.Region unless a spec names one.
	Workers []worker.Spec
	// Discovery is Kubernetes service discovery (--service-discovery, --router-selector,
	// discovery/kube): the raft leader registers and removes the pods' workers. Nil: off.
	Discovery *kube.Config
	// Health configures the health checks of the workers this gateway owns; with
	// DisableHealthCheck, new workers start ready. Required: start from health.DefaultConfig().
	Health health.Config
	// Breaker configures their circuit breakers; its HangTimeout is Gateway.RequestTimeout.
	// Required: start from breaker.DefaultConfig().
	Breaker breaker.Config

	// Raft configures the raft node: its BindAddr, AdvertiseAddr, Ephemeral (raft in memory: no
	// state dir, no weight updates), and anything a test tunes (Tune). The server sets NodeID,
	// AdvertiseHost, StateDir, Join, BootstrapExpect, LeaderLoop, Logger, Registerer, TLS and
	// ClusterKey.
	Raft consensus.Config
	// StateDir is the folder of the durable state, one subfolder per node (--state-dir).
	// Default: $MESHGW_STATE_DIR, else $XDG_STATE_HOME/meshgw, else ~/.local/state/meshgw
	// (storage.ResolveStateDir). Unused with Raft.Ephemeral.
	StateDir string
	// Getenv reads the environment for StateDir's default. Default os.Getenv.
	Getenv func(string) string

	// Cluster configures the mesh, the gRPC listener and the leader's duties.
	Cluster ClusterConfig
	// TLS is the control plane's security; the zero value is plaintext.
	TLS TLSConfig

	// ProbeAddr is the host:port of the extra listener serving only the probe endpoints
	// (--health-check-port). Default "": none.
	ProbeAddr string
	// MetricsAddr is the host:port of /metrics (--prometheus-host, --prometheus-port). Default
	// "": none.
	MetricsAddr string
	// Pprof serves Go's profiler at /debug/pprof/ beside /metrics (--enable-pprof).
	Pprof bool
	// ShutdownGrace bounds the drain of the requests in flight at shutdown
	// (--shutdown-grace-period-secs). Zero: they get none.
	ShutdownGrace time.Duration

	// Logger receives the gateway's logs. Default: a logger that drops them.
	Logger *slog.Logger
	// Registry receives every metric and is what /metrics serves. Default: a new registry.
	Registry *prometheus.Registry
}

// ClusterConfig is how a gateway takes part in the gateway cluster (DESIGN.md sections 3, 4
// and 11). A duration of zero takes its default (New fills it in).
type ClusterConfig struct {
	// MeshBind is the IP the mesh (memberlist) binds; MeshPort its TCP and UDP port (0 picks
	// a free one).
	MeshBind string
	MeshPort int
	// MeshProfile is the mesh's timings: mesh.ProfileLAN, ProfileWAN or ProfileLocal.
	MeshProfile string
	// AdvertiseHost is --mesh-advertise-host: the host peers reach this gateway on, which raft
	// advertises too ("" when not given).
	AdvertiseHost string
	// MeshAdvertise, RPCAdvertise and HTTPAdvertise are the hosts peers reach the mesh, the
	// gRPC listener and the data plane at, published in the mesh metadata.
	MeshAdvertise, RPCAdvertise, HTTPAdvertise string
	// RPCBind and RPCPort are where the gRPC listener (forwarded writes, fleet
	// acknowledgements, outcome reports, cache sync, grpc.health.v1) listens; port 0 picks one.
	RPCBind string
	RPCPort int

	// GossipKey encrypts and authenticates gossip (--mesh-encrypt-key or its file: one key or
	// several, the primary first). Default: the key derived from Gateway.AdminAPIKey when there
	// is one (clusterkey), else none.
	GossipKey string
	// GossipKeyFile is the file GossipKey came from ("" when it came from elsewhere); Reload
	// reads it again with ReadGossipKeys, required with it.
	GossipKeyFile  string
	ReadGossipKeys func() (string, error)

	// Join are the mesh addresses (host:port) of gateways to join, tried in the background
	// until one answers. A node without raft state that joins waits to be added.
	Join []string
	// BootstrapExpect is the number of new gateways that bootstrap a cluster together once they
	// see each other (0: off).
	BootstrapExpect int

	// Voters is the number of raft voters the leader keeps (0: chosen by the fleet's size).
	Voters int
	// DeadVoterGrace is how long a voter may be dead before a live non-voter takes its seat.
	// Default voters.DefaultDeadVoterGrace.
	DeadVoterGrace time.Duration
	// ReconcileInterval is the time between the leader's full reconcile passes. Default
	// voters.DefaultReconcileInterval.
	ReconcileInterval time.Duration
	// OwnerFailoverGrace is how long an owner may be dead or gone before the leader gives its
	// workers to live peers. Default ownership.DefaultFailoverGrace.
	OwnerFailoverGrace time.Duration
	// FleetAckTimeout bounds an admin write's wait for every live gateway to apply it. Default
	// fleetack.DefaultTimeout.
	FleetAckTimeout time.Duration
	// AutoRebalance makes the leader even out worker ownership once membership settles.
	AutoRebalance bool

	// LeaveOnTerminate drains this gateway (its workers, leadership and voter seat go to
	// others) when Run's context ends, before it stops.
	LeaveOnTerminate bool
	// DrainTimeout bounds a drain (POST /mesh/drain, LeaveOnTerminate). Default
	// DefaultDrainTimeout.
	DrainTimeout time.Duration
}

// TLSConfig is the control plane's security (DESIGN.md section 12). With Certs, raft and
// gRPC run mutual TLS; without, peers prove the cluster key derived from Gateway.AdminAPIKey
// when there is one (clusterkey).
type TLSConfig struct {
	// Certs are this gateway's certificate, key and CA, reloaded by Reload. Nil: no TLS.
	Certs *certs.Store
	// CertFile names the certificate file in Reload's log line.
	CertFile string
	// HTTP serves the data plane and the admin API over HTTPS with Certs (--tls-http).
	HTTP bool
	// VerifyNodeID makes the gRPC server require that a peer's certificate names its node id
	// (--tls-verify-node-id).
	VerifyNodeID bool
	// Insecure says the control plane runs in plaintext beyond loopback by choice (--insecure);
	// Warning is what is logged at start and shown by /status then.
	Insecure bool
	Warning  string
	// CheckNodeID refuses a certificate that does not name the node id (--tls-verify-node-id):
	// New fails with its error, and Reload warns. Nil: not checked.
	CheckNodeID func(id string) error
}

// clustered reports whether this gateway expects peers from the start (Join or
// BootstrapExpect); without either it is a mesh of one that others may join.
func (c *ClusterConfig) clustered() bool { return len(c.Join) > 0 || c.BootstrapExpect > 0 }
